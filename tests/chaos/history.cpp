// The chaos clients' history files (see the header).
#include "history.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>

namespace redsync::chaos {

namespace {

std::int64_t read_clock(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::int64_t monotonic_ns() {
  return read_clock(CLOCK_MONOTONIC);
}

std::int64_t to_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

history::history(const std::string& path, std::string client) : client_(std::move(client)) {
  std::random_device os_random;
  while (proc_id_ == 0) proc_id_ = os_random();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("history file " + path + ": " + std::strerror(errno));
}

history::~history() {
  if (fd_ >= 0) ::close(fd_);
}

void history::record(std::string_view op, std::string_view fields) {
  std::string line =
      fmt::format(R"({{"t":{},"w":{},"pid":{},"proc":{},"client":{},"op":"{}")", monotonic_ns(),
                  read_clock(CLOCK_REALTIME), ::getpid(), proc_id_, json_string(client_), op);
  if (!fields.empty()) {
    line += ',';
    line += fields;
  }
  line += "}\n";
  // One write: O_APPEND makes it land whole at the end of the file.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a history that cannot be written shows up as missing events in the checker
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace redsync::chaos
