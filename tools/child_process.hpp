// The command run under the lock, seen from the tool: started through a
// supervisor process (see supervisor.hpp) that leads the command's own
// process group; signalled as a group, reaped through the supervisor.
#pragma once

#include "deadline.hpp"

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redsync::cli {

/// How the command's process group is set up and torn down.
struct spawn_options {
  /// After SIGTERM to the group, this long before SIGKILL: when the command
  /// exits leaving processes behind, when the lock is lost, or when the tool
  /// dies; but never past the validity end minus `margins.kill_margin`.
  std::chrono::milliseconds kill_grace{5000};
  /// The lock's validity end when the command starts (Mutex::until()); the
  /// supervisor ends the group before it unless extend_deadline() moves it
  /// (see deadline.hpp). Default: none.
  std::chrono::steady_clock::time_point valid_until{};
  /// When, relative to the validity end, the supervisor sends SIGTERM and
  /// SIGKILL if no later validity end arrived.
  deadline_margins margins{};
  /// Make the command's group the terminal's foreground group (and give the
  /// terminal back once it is gone): only when stdin is a terminal whose
  /// foreground group is the tool's.
  bool take_terminal = false;
};

/// A command started by spawn(). Not copyable; the owner must reap it
/// (try_wait) before destroying the object, which never kills or waits (if
/// the tool exits first, the supervisor cleans up).
class child_process {
 public:
  /// Starts argv[0] (searched on PATH when it has no '/') with the current
  /// environment plus `extra_env` (NAME, VALUE pairs that replace any existing
  /// variable of that name), in a new process group. The command gets an
  /// empty signal mask. Returns the errno of the failure when the command
  /// cannot be started (ENOENT, EACCES, ...).
  static std::pair<std::optional<child_process>, int> spawn(
      const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& extra_env,
      const spawn_options& options);

  child_process(child_process&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)),
        command_pid_(std::exchange(other.command_pid_, -1)),
        report_fd_(std::exchange(other.report_fd_, -1)),
        deadline_fd_(std::exchange(other.deadline_fd_, -1)),
        take_terminal_(other.take_terminal_),
        last_until_(other.last_until_),
        status_(other.status_),
        enforced_(other.enforced_) {}
  child_process& operator=(child_process&&) = delete;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process();

  /// The supervisor's pid, which is also the process group id.
  pid_t group() const noexcept { return pid_; }
  /// The command's pid (the supervisor's child).
  pid_t command_pid() const noexcept { return command_pid_; }
  /// True if the command, while it runs, ignores `sig` (SIG_IGN, as
  /// /proc/PID/status shows it): sending it `sig` does nothing. False once
  /// it has exited, or when that cannot be read.
  bool command_ignores(int sig) const noexcept;
  /// True once try_wait() has reaped the supervisor: the command and every
  /// process of its group that stayed in it have exited.
  bool exited() const noexcept { return status_.has_value(); }
  /// Sends `sig` to the command's process group unless it was reaped (the
  /// group id could then belong to someone else).
  void signal(int sig) const noexcept;
  /// Hands the supervisor a later validity end of the lock (Mutex::until()
  /// after an extension); an earlier or equal one is not sent. Call it while
  /// the lock is held, never after terminate_group().
  void extend_deadline(std::chrono::steady_clock::time_point until) noexcept;
  /// The lock is lost: the supervisor SIGTERMs the group now and SIGKILLs
  /// it after kill_grace, or kill_margin before the last validity end it
  /// got, whichever comes first. No-op once the group was reaped.
  void terminate_group() noexcept;
  /// Reaps the supervisor if it has exited (WNOHANG); returns exited().
  bool try_wait() noexcept;
  /// The command's exit status as a shell reports it: the exit code, or 128 +
  /// the signal number when a signal killed it. Only after exited().
  int shell_status() const noexcept;

  /// What the supervisor did because the lock's validity end came near with
  /// no later one: each is how long before that end it sent the signal
  /// (negative: after). Only after exited().
  struct deadline_enforcement {
    std::optional<std::chrono::milliseconds> term_before;  ///< SIGTERM, no later validity end arrived
    std::optional<std::chrono::milliseconds> kill_before;  ///< SIGKILL before --kill-grace ran out
    bool acted() const noexcept { return term_before || kill_before; }
  };
  const deadline_enforcement& enforced() const noexcept { return enforced_; }

 private:
  child_process(pid_t pid, pid_t command_pid, int report_fd, int deadline_fd, bool take_terminal,
                std::chrono::steady_clock::time_point until)
      : pid_(pid),
        command_pid_(command_pid),
        report_fd_(report_fd),
        deadline_fd_(deadline_fd),
        take_terminal_(take_terminal),
        last_until_(until) {}
  bool send_deadline(long long value) noexcept;

  pid_t pid_ = -1;
  pid_t command_pid_ = -1;
  int report_fd_ = -1;
  int deadline_fd_ = -1;  // write end of the deadline pipe, non-blocking
  bool take_terminal_ = false;
  std::chrono::steady_clock::time_point last_until_{};  // the latest validity end sent
  std::optional<int> status_;  // the command's raw wait status, else the supervisor's
  deadline_enforcement enforced_;
};

}  // namespace redsync::cli
