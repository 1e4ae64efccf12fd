// Test harness: a wall clock a test can step under a running redis-server.
//
// A clock_offset owns a file holding an offset in milliseconds (a native
// int64); a server started with its env() entries runs under the clock
// shim (clock_shim.c, LD_PRELOAD), whose CLOCK_REALTIME, gettimeofday and
// time read that offset on every call: set() steps the server's wall clock
// (TIME, key expiry, everything Redis dates) at once. The shim's path comes
// from $REDSYNC_CLOCK_SHIM (set by tests/redis/meson.build).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace redsync::test {

class clock_offset {
 public:
  clock_offset() {
    const char* shim = std::getenv("REDSYNC_CLOCK_SHIM");
    if (shim == nullptr || *shim == '\0')
      throw std::runtime_error("clock_offset: REDSYNC_CLOCK_SHIM is not set");
    shim_ = shim;
    char pattern[] = "/tmp/redsync-clock-XXXXXX";
    const int fd = ::mkstemp(pattern);
    if (fd < 0) throw std::runtime_error("clock_offset: mkstemp failed");
    path_ = pattern;
    const std::int64_t zero = 0;
    const bool written = ::write(fd, &zero, sizeof zero) == static_cast<ssize_t>(sizeof zero);
    void* p = written ? ::mmap(nullptr, sizeof zero, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    if (p == MAP_FAILED) {
      ::unlink(path_.c_str());
      throw std::runtime_error("clock_offset: cannot map " + path_);
    }
    offset_ = static_cast<std::int64_t*>(p);
  }
  ~clock_offset() {
    ::munmap(offset_, sizeof *offset_);
    ::unlink(path_.c_str());
  }
  clock_offset(const clock_offset&) = delete;
  clock_offset& operator=(const clock_offset&) = delete;

  /// The environment entries that put a server under this clock (config::env).
  std::vector<std::string> env() const {
    return {"LD_PRELOAD=" + shim_, "REDSYNC_CLOCK_OFFSET_FILE=" + path_};
  }
  /// Sets the server's wall clock to real time + `offset`, at once.
  void set(std::chrono::milliseconds offset) {
    std::atomic_ref<std::int64_t>(*offset_).store(offset.count(), std::memory_order_relaxed);
  }

 private:
  std::string shim_;
  std::string path_;
  std::int64_t* offset_ = nullptr;
};

}  // namespace redsync::test
