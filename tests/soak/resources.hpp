// Soak: what the soak samples (open fds, RSS, libuv handles), and the
// application-owned libuv loop it runs the Redsync on.
#pragma once

#include <uv.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace redsync::soak {

/// Open file descriptors of this process: the entries of /proc/self/fd, less
/// the one that lists them.
struct fd_counts {
  int total = 0;
  int sockets = 0;  ///< those that are sockets (`socket:[inode]`); -1 when unknown
};
/// When no fd is left to list them with (EMFILE), `total` is the limit
/// (RLIMIT_NOFILE) and `sockets` -1. Throws std::runtime_error if
/// /proc/self/fd cannot be read otherwise.
fd_counts open_fds();

/// Resident set size of this process in bytes (/proc/self/statm).
std::size_t rss_bytes();

/// Bytes allocated with malloc and not freed, all arenas (glibc mallinfo2:
/// uordblks + hblkhd). Unlike RSS, blind to fragmentation and to pages the
/// allocator keeps: a leak shows here first.
std::size_t heap_in_use();

/// The handles on a libuv loop, as uv_walk sees them (closing ones included).
struct handle_counts {
  std::map<std::string, int> by_type;  ///< uv_handle_type_name() -> count
  int total = 0;
  /// TCP handles not closing: the live connections to the nodes (the pool's
  /// and the pub/sub listener's).
  int connections = 0;
};

/// A libuv loop owned by the soak and run by a thread of its own, so that its
/// handles can be counted: uv_walk is not thread-safe, so count_handles()
/// marshals the walk onto the loop thread with a uv_async_t and waits for it.
/// The loop thread blocks every signal (as the library's own loop thread
/// does). Its own handles (two uv_async_t) are counted too: a constant.
class loop_thread {
 public:
  loop_thread();
  /// Calls stop() if it was not called; terminates the process if the loop
  /// cannot end (a thread still running the loop cannot be joined).
  ~loop_thread();
  loop_thread(const loop_thread&) = delete;
  loop_thread& operator=(const loop_thread&) = delete;

  uv_loop_t* loop() noexcept { return &loop_; }

  /// Runs the loop on its own thread. Whatever puts handles on the loop (a
  /// Redsync made with it) is made before: libuv handles are created on the
  /// loop's thread or while nobody runs it.
  void start();

  /// Walks the loop on its thread; nullopt when the loop did not get to it
  /// within `bound`. Any thread except the loop thread; one call at a time.
  std::optional<handle_counts> count_handles(std::chrono::milliseconds bound);

  /// Closes the soak's own handles and waits (up to `bound`) for uv_run to
  /// return, which it does once nobody else has a handle open either, then
  /// closes the loop. True when the loop closed cleanly; otherwise `why`
  /// says what was left.
  bool stop(std::chrono::milliseconds bound, std::string& why);

 private:
  static void on_walk(uv_async_t* async);
  static void on_stop(uv_async_t* async);

  uv_loop_t loop_{};
  uv_async_t walk_{};
  uv_async_t stop_{};
  std::thread thread_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::mutex walk_call_;           // serialises count_handles()
  std::uint64_t walks_asked_ = 0;  // guarded by mutex_
  std::uint64_t walks_done_ = 0;   // guarded by mutex_
  handle_counts walked_;           // guarded by mutex_
  bool ended_ = false;             // uv_run returned; guarded by mutex_
  bool stopped_ = false;           // stop() ran
};

}  // namespace redsync::soak
