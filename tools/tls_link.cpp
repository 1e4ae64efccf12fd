#include "tls_link.hpp"

#include "transport/tls_session.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <redsync/error.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace redsync::cli {

tls_link::tls_link(const node_options& node, std::chrono::milliseconds timeout) {
  reader_ = redisReaderCreate();
  if (reader_ == nullptr) {
    error_ = "out of memory";
    return;
  }
  try {
    // Read the files as `redsync lock` does (the arguments were checked
    // before, so this fails only if a file changed meanwhile).
    context_ = detail::make_tls_context(node);
  } catch (const config_error& e) {
    error_ = fmt::format("TLS: {}", e.what());
    return;
  }
  if (!connect_tcp(node, timeout)) return;
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(timeout.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  session_ = std::make_unique<detail::tls_session>(*context_);
  for (;;) {
    const auto step = session_->handshake();
    // Our next handshake message, or on failure the alert that tells the
    // server why.
    if (!send_output() && step != detail::tls_session::progress::failed) return;
    if (step == detail::tls_session::progress::done) return;
    if (step == detail::tls_session::progress::failed) {
      error_ = "TLS handshake: " + session_->error();
      return;
    }
    if (!receive("TLS handshake: ")) return;
  }
}

tls_link::~tls_link() {
  session_.reset();
  if (fd_ >= 0) ::close(fd_);
  if (reader_ != nullptr) redisReaderFree(reader_);
}

// Each resolved address in turn, each connect bounded by `timeout`.
bool tls_link::connect_tcp(const node_options& node, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(node.port);
  if (const int rc = ::getaddrinfo(node.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    error_ = fmt::format("resolve {}: {}", node.host, gai_strerror(rc));
    return false;
  }
  std::string last = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (rc == 0) {
        last = fmt::format("timed out after {} ms", timeout.count());
        rc = -1;
      } else if (rc > 0) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        if (err != 0) last = std::strerror(err);
      } else {
        last = std::strerror(errno);
      }
    } else if (rc != 0) {
      last = std::strerror(errno);
    }
    if (rc == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      fd_ = fd;
      break;
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (fd_ < 0) error_ = "connect: " + last;
  return fd_ >= 0;
}

// Writes the session's pending ciphertext to the socket.
bool tls_link::send_output() {
  std::string out;
  session_->take_output(out);
  std::size_t sent = 0;
  while (sent < out.size()) {
    const ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error_ = fmt::format("TLS: write: {}",
                           errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : std::strerror(errno));
      return false;
    }
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads what the socket has (blocking, bounded by the timeout) into the session.
bool tls_link::receive(const char* during) {
  char buf[16 * 1024];
  ssize_t n = 0;
  do {
    n = ::recv(fd_, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n == 0) {
    error_ = fmt::format("{}the server closed the connection", during);
    return false;
  }
  if (n < 0) {
    error_ = fmt::format("{}{}", during,
                         errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : std::strerror(errno));
    return false;
  }
  session_->feed(buf, static_cast<std::size_t>(n));
  return true;
}

void tls_link::append(const std::vector<std::string>& argv) {
  if (!ok()) return;
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    args.push_back(a.c_str());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int len = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), args.data(), lens.data());
  if (len > 0 && !session_->write(cmd, static_cast<std::size_t>(len))) {
    error_ = "TLS: " + session_->error();
  }
  redisFreeCommand(cmd);
}

redisReply* tls_link::read_reply() {
  if (!ok() || !send_output()) return nullptr;
  for (;;) {
    if (!plain_in_.empty()) {
      redisReaderFeed(reader_, plain_in_.data(), plain_in_.size());
      plain_in_.clear();
    }
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      error_ = fmt::format("protocol error: {}", reader_->errstr);
      return nullptr;
    }
    if (reply != nullptr) return static_cast<redisReply*>(reply);
    if (!receive("TLS: read: ")) return nullptr;
    const bool open = session_->read(plain_in_);
    // A post-handshake message may want an answer (a KeyUpdate).
    if (!send_output()) return nullptr;
    if (!open && plain_in_.empty()) {
      error_ = "TLS: read: " + session_->error();
      return nullptr;
    }
  }
}

bool speaks_tls(const node_options& node, std::chrono::milliseconds timeout) {
  if (!node.unix_path.empty()) return false;
  node_options probe = node;
  probe.tls = tls_options{};
  probe.tls.enabled = true;
  probe.tls.insecure_skip_verify = true;
  const tls_link link(probe, timeout);
  // A server that wants a client certificate speaks TLS as well.
  return link.ok() || link.error().find("client certificate") != std::string::npos;
}

}  // namespace redsync::cli
