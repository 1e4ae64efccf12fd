// The command run under the lock: spawned with posix_spawnp, signalled and
// reaped by pid only.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redsync::cli {

/// A child process started by spawn(). Not copyable; the owner must reap it
/// (try_wait) before destroying the object, which never kills or waits.
class child_process {
 public:
  /// Starts argv[0] (searched on PATH when it has no '/') with the current
  /// environment plus `extra_env` (NAME, VALUE pairs that replace any existing
  /// variable of that name). The child gets an empty signal mask and stays in
  /// the caller's process group. Returns the errno of the failure when the
  /// command cannot be started (ENOENT, EACCES, ...).
  static std::pair<std::optional<child_process>, int> spawn(
      const std::vector<std::string>& argv,
      const std::vector<std::pair<std::string, std::string>>& extra_env);

  child_process(child_process&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)), status_(other.status_) {}
  child_process& operator=(child_process&&) = delete;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() = default;

  pid_t pid() const noexcept { return pid_; }
  /// True once try_wait() has reaped the child.
  bool exited() const noexcept { return status_.has_value(); }
  /// Sends `sig` unless the child has already been reaped (its pid may then
  /// belong to another process).
  void signal(int sig) const noexcept;
  /// Reaps the child if it has exited (WNOHANG); returns exited().
  bool try_wait() noexcept;
  /// The child's exit status as a shell reports it: the exit code, or 128 +
  /// the signal number when a signal killed it. Only after exited().
  int shell_status() const noexcept;

 private:
  explicit child_process(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> status_;  // raw waitpid status
};

}  // namespace redsync::cli
