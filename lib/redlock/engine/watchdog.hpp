#pragma once

// Auto-extension of a held lock or permit, on the loop, and the lost signal.
//
// After an acquisition the watchdog extends every `interval` (through the
// holder's own extension, so a mutex's goes through its operation queue and
// never overlaps a user call). A failed extension is retried while one could
// still land before `until`. The "lost" alarm is armed at
// `until - timeout - margin`: past that point no extension started now could
// complete within the validity, so unless one is in flight (it normally
// completes before `until`, and decides), the hold is lost. An extension
// still in flight at `until - margin` does not delay the verdict. Hence the
// lost signal fires before the last computed `until`, and at most once per
// start().
//
// stop() is called when a release starts, before it is sent, and an
// automatic extension re-checks active() when it runs, so no extension can
// follow the release and re-create the key.
//
// The watchdog does not own what it watches: the holder (a mutex_state, a
// permit_state) owns it and stops it before it goes away.

#include "redlock/engine/engine.hpp"
#include "transport/loop_timer.hpp"

#include <redsync/error.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace redsync::detail {

// The auto-extension fields a mutex_options and a semaphore_options share.
struct watch_settings {
  std::chrono::milliseconds expiry{};
  std::chrono::microseconds timeout{};   // per-node command timeout
  std::chrono::milliseconds interval{};  // 0 = expiry / 3
  std::chrono::milliseconds max_hold{};
  int max_extensions = 0;
  std::function<void(const result&)> on_lost;

  template <class Options>
  static watch_settings of(const Options& o, std::chrono::microseconds timeout) {
    return {o.expiry, timeout, o.auto_extend_interval, o.max_hold, o.max_extensions, o.on_lost};
  }
};

class watchdog final : public loop_task {
 public:
  using clock = std::chrono::steady_clock;

  // What the watchdog watches. Loop thread.
  class holder {
   public:
    // The end of the current validity (read under the holder's lock).
    virtual clock::time_point valid_until() const = 0;
    // Starts one automatic extension; its outcome goes to on_extended().
    virtual void extend_automatically() = 0;
    // The hold is lost: held() turns false, the lost token stops, the
    // telemetry is told. The watchdog calls `on_lost` right after. Keeps
    // the holder alive until it returns: a stop_callback on the lost token
    // (or a thread that saw the loss) may drop its last handle meanwhile;
    // the watchdog itself may be gone once it returns.
    virtual void mark_lost(const result& why) = 0;

   protected:
    ~holder() = default;
  };

  watchdog(engine& eng, holder& h, watch_settings s);
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

  engine& eng_;
  holder& holder_;
  const watch_settings settings_;
  const std::chrono::microseconds interval_;
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
