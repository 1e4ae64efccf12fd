// What wakes the tool's main thread while it waits: process signals, read
// from a signalfd, and notifications from the library's loop thread, through
// an eventfd. Both are plain file descriptors, so one poll() waits for all
// and no code ever runs inside a signal handler.
#pragma once

#include <chrono>
#include <optional>

namespace redsync::cli {

/// A signal as received: its number and whether the kernel generated it for
/// a terminal (Ctrl-C, Ctrl-\, hangup) rather than a process sending it.
struct received_signal {
  int number = 0;
  bool from_terminal = false;
};

/// SIGINT, SIGTERM, SIGHUP and SIGCHLD, delivered through a signalfd.
/// Construct it before any thread starts: the signals are blocked in the
/// calling thread, and threads created later inherit that mask, so none of
/// them ever takes one of these signals asynchronously.
class signal_channel {
 public:
  /// Throws std::system_error if the signalfd cannot be created.
  signal_channel();
  ~signal_channel();
  signal_channel(const signal_channel&) = delete;
  signal_channel& operator=(const signal_channel&) = delete;

  int fd() const noexcept { return fd_; }
  /// The next pending signal, or nullopt when none is pending.
  std::optional<received_signal> read() const noexcept;

 private:
  int fd_ = -1;
};

/// A counter another thread can bump to wake the main thread's poll().
class notifier {
 public:
  /// Throws std::system_error if the eventfd cannot be created.
  notifier();
  ~notifier();
  notifier(const notifier&) = delete;
  notifier& operator=(const notifier&) = delete;

  int fd() const noexcept { return fd_; }
  /// Wakes the waiter; safe from any thread.
  void notify() const noexcept;
  /// Clears pending notifications.
  void drain() const noexcept;

 private:
  int fd_ = -1;
};

/// Waits until `a` or `b` (either may be -1) is readable or `timeout` passes
/// (nullopt = no timeout). Returns the readable fds as a pair of flags.
struct readiness {
  bool a = false;
  bool b = false;
};
readiness wait_readable(int a, int b, std::optional<std::chrono::milliseconds> timeout);

}  // namespace redsync::cli
