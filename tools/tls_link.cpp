#include "tls_link.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace redsync::cli {
namespace {

std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

bool is_ip_literal(const std::string& name) {
  in6_addr a6{};
  in_addr a4{};
  return inet_pton(AF_INET, name.c_str(), &a4) == 1 || inet_pton(AF_INET6, name.c_str(), &a6) == 1;
}

}  // namespace

tls_link::tls_link(const node_options& node, std::chrono::milliseconds timeout) {
  reader_ = redisReaderCreate();
  if (reader_ == nullptr) {
    error_ = "out of memory";
    return;
  }
  if (!connect_tcp(node, timeout)) return;
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(timeout.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (!setup_tls(node)) return;
  ERR_clear_error();
  if (SSL_connect(ssl_) != 1) fail_tls("TLS handshake: ");
}

tls_link::~tls_link() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ssl_ctx_ != nullptr) SSL_CTX_free(ssl_ctx_);
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

bool tls_link::setup_tls(const node_options& node) {
  const tls_options& o = node.tls;
  ERR_clear_error();
  ssl_ctx_ = SSL_CTX_new(TLS_client_method());
  if (ssl_ctx_ == nullptr) {
    error_ = "TLS: " + openssl_errors();
    return false;
  }
  SSL_CTX_set_min_proto_version(ssl_ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(ssl_ctx_, o.insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
  verifies_ = !o.insecure_skip_verify;
  // An encrypted key fails instead of prompting for a pass phrase.
  SSL_CTX_set_default_passwd_cb(ssl_ctx_, [](char*, int, int, void*) { return 0; });
  const bool loaded =
      o.ca_file.empty() && o.ca_dir.empty()
          ? SSL_CTX_set_default_verify_paths(ssl_ctx_) == 1
          : SSL_CTX_load_verify_locations(ssl_ctx_, o.ca_file.empty() ? nullptr : o.ca_file.c_str(),
                                          o.ca_dir.empty() ? nullptr : o.ca_dir.c_str()) == 1;
  if (!loaded) {
    error_ = fmt::format("TLS: cannot load the CA certificates: {}", openssl_errors());
    return false;
  }
  if (!o.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(ssl_ctx_, o.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(ssl_ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
    error_ = fmt::format("TLS: cannot load the client certificate: {}", openssl_errors());
    return false;
  }
  ssl_ = SSL_new(ssl_ctx_);
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
    error_ = "TLS: " + openssl_errors();
    return false;
  }
  const std::string name = o.server_name.empty() ? node.host : o.server_name;
  const bool ip = is_ip_literal(name);
  if (!ip) SSL_set_tlsext_host_name(ssl_, name.c_str());
  if (!o.insecure_skip_verify) {
    const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str())
                      : SSL_set1_host(ssl_, name.c_str());
    if (ok != 1) {
      error_ = fmt::format("TLS: cannot check the server's name \"{}\": {}", name, openssl_errors());
      return false;
    }
  }
  return true;
}

// As the library words it (lib/transport/tls_session.cpp).
void tls_link::fail_tls(const char* during) {
  const unsigned long first = ERR_peek_error();
  const long verdict = verifies_ ? SSL_get_verify_result(ssl_) : X509_V_OK;
  std::string queue = openssl_errors();
  if (verdict != X509_V_OK) {
    error_ = fmt::format("{}certificate verify failed: {}", during, X509_verify_cert_error_string(verdict));
    return;
  }
  if (ERR_GET_REASON(first) == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED) {
    error_ =
        fmt::format("{}the server requires a client certificate (--tls-cert, --tls-key): {}", during, queue);
    return;
  }
  if (queue.empty()) {
    queue = errno == EAGAIN || errno == EWOULDBLOCK ? std::string("timed out")
                                                    : std::string("the server closed the connection");
  }
  error_ = during + queue;
}

void tls_link::append(const std::vector<std::string>& argv) {
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    args.push_back(a.c_str());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int len = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), args.data(), lens.data());
  if (len > 0) out_.append(cmd, static_cast<std::size_t>(len));
  redisFreeCommand(cmd);
}

bool tls_link::flush() {
  if (out_.empty()) return true;
  ERR_clear_error();
  std::size_t written = 0;
  if (SSL_write_ex(ssl_, out_.data(), out_.size(), &written) != 1) {
    fail_tls("TLS: write: ");
    return false;
  }
  out_.clear();
  return true;
}

redisReply* tls_link::read_reply() {
  if (!ok() || !flush()) return nullptr;
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      error_ = fmt::format("protocol error: {}", reader_->errstr);
      return nullptr;
    }
    if (reply != nullptr) return static_cast<redisReply*>(reply);
    char buf[16 * 1024];
    std::size_t n = 0;
    ERR_clear_error();
    if (SSL_read_ex(ssl_, buf, sizeof buf, &n) != 1) {
      fail_tls("TLS: read: ");
      return nullptr;
    }
    redisReaderFeed(reader_, buf, n);
  }
}

}  // namespace redsync::cli
