// One run of `redsync lock`, from acquiring to releasing. The phases live in
// their own files: lock_acquire.cpp (acquiring, and saying on stderr why it
// takes long or cannot succeed), permit_acquire.cpp (the same for a permit,
// with -n), lock_held.cpp (what is held: the mutex, exclusive or with
// --shared a reader's hold, or the permit),
// lock_command.cpp (the command, or hold mode without one, and the release).
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

#include <climits>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace redsync::cli {

/// What the loop thread hands to the main thread.
struct loop_events {
  notifier wake;
  std::mutex mu;
  std::optional<result> acquired;  ///< outcome of the acquisition (lock_async / try_lock_async)
  std::optional<result> checked;   ///< outcome of a check attempt (see lock_acquire.cpp)
  std::optional<acquire_result> permit_acquired;  ///< outcome of a permit's acquisition (-n)
  std::optional<std::string> lost_reason;         ///< set by on_lost
};

/// Writes "redsync: LINE" to stderr.
void print_err(const std::string& line);

/// A callback for the loop thread that stores its outcome in `ev->*slot`
/// and wakes the main thread.
template <class T>
std::function<void(T)> deliver(std::shared_ptr<loop_events> ev, std::optional<T> loop_events::*slot) {
  return [ev = std::move(ev), slot](T outcome) {
    {
      std::lock_guard lk(ev->mu);
      (*ev).*slot = std::move(outcome);
    }
    ev->wake.notify();
  };
}

/// The context of the whole acquisition: --wait (but not --wait 0, one
/// try), cancelled by `stop`.
inline context acquisition_context(const lock_config& cfg, std::stop_token stop) {
  const context ctx = cfg.wait && !cfg.one_try() ? context::timeout(*cfg.wait) : context{};
  return ctx.with(std::move(stop));
}

/// An on_lost that stores the loss in `ev` for the main thread and wakes it.
std::function<void(const result&)> report_loss_to(std::shared_ptr<loop_events> ev);

/// The options a mutex and a semaphore share, from the command line: the
/// attempts, and auto-extension whose loss the main thread is told of.
template <class Options>
Options holding_options(const lock_config& cfg, const std::shared_ptr<loop_events>& ev) {
  Options o;
  o.expiry = cfg.ttl;
  o.tries = cfg.tries.value_or(INT_MAX);
  if (cfg.retry_delay) {
    const std::chrono::milliseconds d = *cfg.retry_delay;
    o.retry_delay = [d](int) { return d; };
  }
  if (cfg.drift_factor) o.drift_factor = *cfg.drift_factor;
  o.auto_extend = true;
  o.on_lost = report_loss_to(ev);
  return o;
}

/// A holder of the name `cfg` asks for: a Mutex of it (exclusive, the
/// default: the same holder as an RWMutex's writer), or with --shared the
/// reader of an RWMutex of it.
Mutex new_holder(Redsync& rs, const lock_config& cfg, mutex_options options);

class lock_run {
 public:
  explicit lock_run(const lock_config& cfg);
  /// Acquires, runs the command (or holds), releases; returns the exit status.
  int run();

 private:
  // lock_acquire.cpp. Returns -1 once the lock is held (by held()), else
  // the exit status.
  int acquire();
  void report_waiting(result check, std::chrono::steady_clock::duration waited) const;
  // Words the nodes that refused because of the other side of the
  // read-write lock (readers, a writer) as such (rw_refusal.hpp).
  void explain_refusals(result& r) const;
  // Waits up to `timeout` (nullopt: no bound) for the loop thread or a
  // signal. A signal that interrupts an acquisition is kept in
  // `interrupted_by` (the first only) and stops `stop`. True when the loop
  // thread woke us.
  bool await_acquisition(std::optional<std::chrono::milliseconds> timeout, int& interrupted_by,
                         std::stop_source& stop);
  // Rewords the failure of each redis:// node whose port turns out to speak
  // TLS (asked once per node; see tls_failure.hpp), so that it is judged a
  // refusal rather than an outage.
  void explain_tls_ports(result& r);
  int report_failure(const result& r, const acquire_verdict& v) const;

  // permit_acquire.cpp: -n. Returns -1 once the permit is held, else the
  // exit status.
  int acquire_permit();

  // lock_held.cpp: what is held, the mutex or the permit (-n).
  std::chrono::steady_clock::time_point held_until() const;
  bool held_lost() const;
  std::stop_token held_lost_token() const;
  result release_held();
  // What the command gets in its environment, and hold mode prints.
  std::vector<std::pair<std::string, std::string>> held_environment() const;
  // `lock "NAME"`, `shared lock "NAME"` (--shared), or `permit SLOT of
  // semaphore "NAME"`, for messages.
  std::string what() const;

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
  const Mutex& held() const { return checker_won_ ? checker_ : main_; }

  const lock_config& cfg_;
  const deadline_margins margins_;
  // Before the Redsync: its loop thread must inherit the blocked signals.
  signal_channel signals_;
  std::shared_ptr<loop_events> ev_;
  Redsync rs_;
  // The waiter, and a second holder of the same name (and kind: both
  // readers with --shared) that makes the check attempts while the waiter
  // waits; whichever acquires is held().
  Mutex main_;
  Mutex checker_;
  bool checker_won_ = false;
  // -n: the semaphore NAME of K permits, and the permit acquired.
  std::optional<Semaphore> semaphore_;
  permit permit_;
  // Per node: whether its port speaks TLS, once asked (explain_tls_ports).
  std::vector<std::optional<bool>> tls_port_;
};

}  // namespace redsync::cli
