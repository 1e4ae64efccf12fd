// What wakes the tool's main thread while it waits: process signals, read
// from a signalfd, and notifications from the library's loop thread, through
// an eventfd. Both are plain file descriptors, so one poll() waits for all
// and no code ever runs inside a signal handler.
#pragma once

#include <chrono>
#include <optional>

namespace redsync::cli {

/// What the tool does with each signal it reads from the signal_channel.
/// Every signal whose default action would kill or stop the tool is here:
/// the tool must outlive its command to release the lock and report.
enum class signal_role {
  /// SIGCHLD: the supervisor may have exited.
  child,
  /// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM: forwarded to
  /// the command's process group (the command decides whether to exit);
  /// while acquiring, the tool gives up with 128+N instead.
  forward_or_interrupt,
  /// SIGWINCH, SIGCONT: forwarded; ignored while acquiring.
  forward,
  /// SIGPIPE (a closed stderr must not kill the tool; the write fails
  /// instead), SIGTSTP, SIGTTIN, SIGTTOU (stopping the tool would stop the
  /// lock's extension while the command may still run): ignored.
  ignore,
};
signal_role role_of(int sig) noexcept;

/// A signal as received.
struct received_signal {
  int number = 0;
};

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
