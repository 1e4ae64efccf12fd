#include "fake_redis.hpp"

#include "redlock/scripts/scripts.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>

namespace redsync::test {

namespace {

std::runtime_error sys_error(const char* what) {
  return std::runtime_error(std::string("fake_redis: ") + what + ": " + std::strerror(errno));
}

// Reads "<digits>\r\n" at `at`; nullopt when the line is not complete yet.
// A malformed line throws.
std::optional<long long> read_number_line(const std::string& buf, std::size_t& at) {
  const auto end = buf.find("\r\n", at);
  if (end == std::string::npos) {
    if (buf.size() - at > 32) throw std::runtime_error("length line too long");
    return std::nullopt;
  }
  const std::string digits = buf.substr(at, end - at);
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw std::runtime_error("bad length: " + digits);
  at = end + 2;
  return std::stoll(digits);
}

// One complete command (an array of bulk strings) from the front of `buf`:
// removes it and returns its arguments, or nullopt (and leaves `buf` alone)
// when more bytes are needed. A protocol error throws.
std::optional<std::vector<std::string>> take_command(std::string& buf) {
  if (buf.empty()) return std::nullopt;
  if (buf[0] != '*') throw std::runtime_error("expected an array");
  std::size_t at = 1;
  const auto argc = read_number_line(buf, at);
  if (!argc) return std::nullopt;
  std::vector<std::string> argv;
  for (long long i = 0; i < *argc; ++i) {
    if (at >= buf.size()) return std::nullopt;
    if (buf[at] != '$') throw std::runtime_error("expected a bulk string");
    ++at;
    const auto len = read_number_line(buf, at);
    if (!len) return std::nullopt;
    const auto n = static_cast<std::size_t>(*len);
    if (buf.size() < at + n + 2) return std::nullopt;
    argv.emplace_back(buf, at, n);
    at += n + 2;
  }
  buf.erase(0, at);
  return argv;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Writes all of `s` (the client reads promptly; the socket is blocking).
bool write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const auto n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

struct fake_redis::client {
  int fd = -1;
  std::string in;
};

std::string fake_redis::bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

std::string fake_redis::redis_info(std::string_view run_id) {
  return bulk("# Server\r\nredis_version:7.0.15\r\nrun_id:" + std::string(run_id) +
              "\r\nuptime_in_seconds:1000\r\n");
}

fake_redis::fake_redis(fake_config cfg) : cfg_(std::move(cfg)) {
  if (cfg_.info_reply.empty()) cfg_.info_reply = redis_info(cfg_.record_run);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw sys_error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // the kernel picks a free port
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const auto e = sys_error("listen");
    ::close(listen_fd_);
    throw e;
  }
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_fds_, O_CLOEXEC) != 0) {
    const auto e = sys_error("pipe");
    ::close(listen_fd_);
    throw e;
  }
  thread_ = std::thread([this] { serve(); });
}

fake_redis::~fake_redis() {
  const char stop = 's';
  while (::write(wake_fds_[1], &stop, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
  ::close(listen_fd_);
}

std::string fake_redis::address() const {
  return "127.0.0.1:" + std::to_string(port_);
}

std::string fake_redis::uri() const {
  return "redis://" + address();
}

std::size_t fake_redis::calls(std::string_view verb) const {
  std::lock_guard lk(mu_);
  const auto it = calls_.find(verb);
  return it == calls_.end() ? 0 : it->second;
}

std::size_t fake_redis::acquisitions() const {
  std::lock_guard lk(mu_);
  return acquisitions_;
}

std::string fake_redis::answer(const std::vector<std::string>& argv) {
  if (argv.empty()) return "-ERR empty command\r\n";
  const std::string verb = upper(argv[0]);
  std::lock_guard lk(mu_);
  ++calls_[verb];
  if (verb == "PING") return "+PONG\r\n";
  if (verb == "INFO") return cfg_.info_reply;
  if ((verb == "EVALSHA" || verb == "EVAL") && argv.size() >= 3) {
    using namespace redsync::detail;
    // EVALSHA names the script by its SHA1, EVAL by its source.
    const auto is = [&](const lua_script& s) {
      return verb == "EVALSHA" ? argv[1] == s.sha1 : argv[1] == s.source;
    };
    if (is(acquire_script())) {
      ++acquisitions_;
      // The script raises the recorded window to the expiry (ARGV[2]) and
      // answers the raised one.
      const std::size_t keys = std::stoul(argv[2]);
      const std::string expiry = argv.size() > 4 + keys ? argv[4 + keys] : "0";
      return "*4\r\n:1\r\n" + bulk(cfg_.record_run) + ":600000\r\n:" + expiry + "\r\n";
    }
    if (is(record_read_script()))
      return "*6\r\n" + bulk("5") + bulk(cfg_.record_run) + bulk("0") + bulk("600000") + bulk("mark") +
             bulk("0");
    for (const lua_script* s : {&record_stamp_script(), &release_script(), &extend_script(), &check_script(),
                                &fence_script(), &leave_script()}) {
      if (is(*s)) return ":1\r\n";
    }
  }
  return "-ERR unknown\r\n";
}

void fake_redis::serve() {
  std::vector<std::unique_ptr<client>> clients;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_fds_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const auto& c : clients) fds.push_back({c->fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;  // asked to stop
    if ((fds[1].revents & POLLIN) != 0) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) clients.push_back(std::make_unique<client>(client{fd, {}}));
    }
    // Entries 2.. match clients as they were before this accept.
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      client& c = *clients[i - 2];
      char buf[4096];
      const auto n = ::recv(c.fd, buf, sizeof buf, 0);
      bool keep = n > 0 || (n < 0 && errno == EINTR);
      if (n > 0) {
        c.in.append(buf, static_cast<std::size_t>(n));
        try {
          std::string out;  // pipelined commands get their replies in one write
          while (auto argv = take_command(c.in)) out += answer(*argv);
          keep = write_all(c.fd, out);
        } catch (const std::exception&) {
          keep = false;  // a protocol error: a real server closes the connection too
        }
      }
      if (!keep) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    std::erase_if(clients, [](const auto& c) { return c->fd < 0; });
  }
  for (const auto& c : clients) ::close(c->fd);
}

}  // namespace redsync::test
