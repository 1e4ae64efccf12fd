#pragma once

// Auto-extension of a held lock, on the loop, and the lost-lock signal.
//
// After an acquisition the watchdog extends every `interval` (through the
// mutex's operation queue, so an extension never overlaps a user call). A
// failed extension is retried while one could still land before `until`.
// The "lost" alarm is armed at `until - timeout - margin`: past that point no
// extension started now could complete within the validity, so unless one is
// in flight (it normally completes before `until`, and decides), the lock is
// lost. An extension still in flight at `until - margin` does not delay the
// verdict. Hence the lost signal fires before the last computed `until`.
//
// stop() is called when a release is enqueued, before it is sent, and the
// extension operation re-checks active() when it runs, so no extension can
// follow the release and re-create the key.

#include "redlock/engine.hpp"
#include "transport/loop_timer.hpp"

#include <redsync/error.hpp>

#include <chrono>
#include <string>

namespace redsync::detail {

struct mutex_state;

class watchdog final : public loop_task {
 public:
  using clock = std::chrono::steady_clock;

  explicit watchdog(mutex_state& st);
  ~watchdog() override;

  // Loop thread. Starts watching an acquisition made at `acquired_at`.
  void start(clock::time_point acquired_at);
  // Loop thread. Idempotent. Closes the timers; no callback runs after.
  void stop();
  bool active() const noexcept { return active_; }

  // Loop thread: the outcome of an automatic extension.
  void on_extended(const result& r);

  void on_shutdown() override { stop(); }

 private:
  void schedule_extension(std::chrono::microseconds after);
  void extend_now();
  void arm_lost_alarm();
  void on_lost_alarm();
  void declare_lost(const result& why);
  bool cap_reached() const;
  // "max_extensions (N) reached" or "max_hold (N ms) reached", or empty.
  std::string cap_reason() const;
  std::chrono::microseconds margin() const;

  mutex_state& st_;
  std::chrono::microseconds interval_;
  loop_timer* next_ = nullptr;
  loop_timer* alarm_ = nullptr;
  bool active_ = false;
  bool in_flight_ = false;
  bool final_alarm_ = false;
  int extensions_ = 0;
  clock::time_point acquired_at_{};
  result last_failure_;
};

}  // namespace redsync::detail
