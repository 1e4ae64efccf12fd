// One run of `redsync lock`, from acquiring to releasing. The phases live in
// their own files: lock_acquire.cpp (acquiring, and saying on stderr why it
// takes long or cannot succeed), lock_command.cpp (the command, or hold mode
// without one, and the release).
//
// Threads: the main thread (which owns the child and every signal) and the
// library's loop thread (which completes the calls and reports a loss). The
// loop thread only stores an outcome in loop_events and bumps an eventfd;
// the main thread waits in poll() on that eventfd and on a signalfd.
#pragma once

#include "acquire_failure.hpp"
#include "child_process.hpp"
#include "deadline.hpp"
#include "lock_config.hpp"
#include "wakeups.hpp"

#include <redsync/redsync.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace redsync::cli {

/// What the loop thread hands to the main thread.
struct loop_events {
  notifier wake;
  std::mutex mu;
  std::optional<result> acquired;          ///< outcome of the acquisition (lock_async / try_lock_async)
  std::optional<result> checked;           ///< outcome of a check attempt (see lock_acquire.cpp)
  std::optional<std::string> lost_reason;  ///< set by on_lost
};

/// Writes "redsync: LINE" to stderr.
void print_err(const std::string& line);

class lock_run {
 public:
  explicit lock_run(const lock_config& cfg);
  /// Acquires, runs the command (or holds), releases; returns the exit status.
  int run();

 private:
  // lock_acquire.cpp. Returns -1 once the lock is held (by held()), else
  // the exit status.
  int acquire();
  void report_waiting(const result& check, std::chrono::steady_clock::duration waited) const;
  // Rewords the failure of each redis:// node whose port turns out to speak
  // TLS (asked once per node; see tls_failure.hpp), so that it is judged a
  // refusal rather than an outage.
  void explain_tls_ports(result& r);
  int report_failure(const result& r, const acquire_verdict& v) const;

  // lock_command.cpp
  int run_command();
  int hold();
  bool supervise(child_process& child);
  void report_forwarded(const child_process& child, int sig) const;
  void report_enforced(const child_process::deadline_enforcement& e, bool lost_reported);
  bool lost_now();
  std::string lost_reason();
  result release();
  int release_after_use();

  Mutex& held() { return checker_won_ ? checker_ : main_; }

  const lock_config& cfg_;
  const deadline_margins margins_;
  // Before the Redsync: its loop thread must inherit the blocked signals.
  signal_channel signals_;
  std::shared_ptr<loop_events> ev_;
  Redsync rs_;
  // The waiter, and a second holder of the same name that makes the check
  // attempts while the waiter waits; whichever acquires is held().
  Mutex main_;
  Mutex checker_;
  bool checker_won_ = false;
  // Per node: whether its port speaks TLS, once asked (explain_tls_ports).
  std::vector<std::optional<bool>> tls_port_;
};

}  // namespace redsync::cli
