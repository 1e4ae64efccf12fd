// Automatic extension of a held lock and the lost-lock signal.

#include "redlock/watchdog.hpp"

#include "redlock/mutex_state.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;

watchdog::watchdog(mutex_state& st)
    : st_(st),
      interval_(st.opts.auto_extend_interval > std::chrono::milliseconds::zero()
                    ? microseconds(st.opts.auto_extend_interval)
                    : microseconds(st.opts.expiry) / 3) {}

watchdog::~watchdog() {
  stop();
}

void watchdog::start(clock::time_point acquired_at) {
  stop();
  active_ = true;
  in_flight_ = false;
  extensions_ = 0;
  acquired_at_ = acquired_at;
  st_.eng.add_task(this);
  next_ = loop_timer::create(st_.eng.loop().loop());
  alarm_ = loop_timer::create(st_.eng.loop().loop());
  schedule_extension(interval_);
  arm_lost_alarm();
}

void watchdog::stop() {
  if (!active_) return;
  active_ = false;
  st_.eng.remove_task(this);
  next_->close();
  alarm_->close();
  next_ = alarm_ = nullptr;
}

bool watchdog::cap_reached() const {
  return !cap_reason().empty();
}

std::string watchdog::cap_reason() const {
  if (st_.opts.max_extensions > 0 && extensions_ >= st_.opts.max_extensions)
    return fmt::format("max_extensions ({}) reached", st_.opts.max_extensions);
  if (st_.opts.max_hold > std::chrono::milliseconds::zero() &&
      clock::now() - acquired_at_ >= st_.opts.max_hold)
    return fmt::format("max_hold ({} ms) reached", st_.opts.max_hold.count());
  return {};
}

void watchdog::schedule_extension(microseconds after) {
  next_->start(std::max(after, microseconds::zero()), [this] { extend_now(); });
}

void watchdog::extend_now() {
  if (!active_ || in_flight_) return;
  if (cap_reached()) return;  // let it run out; the alarm reports the loss
  in_flight_ = true;
  st_.submit(op_kind::auto_extend, {}, {}, [self = st_.shared_from_this()](result r) {
    if (self->wd) self->wd->on_extended(r);
  });
}

void watchdog::on_extended(const result& r) {
  in_flight_ = false;
  if (!active_) return;
  if (r.ok()) {
    last_failure_ = {};  // an earlier failure is not why a later loss happens
    ++extensions_;
    arm_lost_alarm();
    schedule_extension(interval_);
    return;
  }
  last_failure_ = r;
  if (r.error == errc::taken || r.error == errc::expired || r.error == errc::not_held) {
    // A quorum says the key is gone or someone else's: nothing to retry.
    return declare_lost(r);
  }
  // Retry soon while an extension started now could still land in time.
  clock::time_point until;
  {
    std::lock_guard lk(st_.mu);
    until = st_.until;
  }
  const auto retry_in = std::max(microseconds(1000), interval_ / 10);
  if (clock::now() + retry_in + st_.timeout + margin() < until) {
    schedule_extension(retry_in);
  } else {
    declare_lost(r);
  }
}

// Slack for a loaded loop (timers firing late, callbacks queued): the lost
// signal must come before `until`, not merely around it.
microseconds watchdog::margin() const {
  return std::max(microseconds(2000), microseconds(st_.opts.expiry) / 50);
}

void watchdog::arm_lost_alarm() {
  clock::time_point until;
  {
    std::lock_guard lk(st_.mu);
    until = st_.until;
  }
  final_alarm_ = false;
  const auto at = until - st_.timeout - margin();
  alarm_->start(duration_cast<microseconds>(at - clock::now()), [this] { on_lost_alarm(); });
}

void watchdog::on_lost_alarm() {
  if (!active_) return;
  if (in_flight_ && !final_alarm_) {
    // An extension in flight normally completes within the timeout, so
    // before `until`, and decides. If it has not by `until - margin`, the
    // lock is reported lost anyway: better a false alarm than a late one.
    clock::time_point until;
    {
      std::lock_guard lk(st_.mu);
      until = st_.until;
    }
    final_alarm_ = true;
    alarm_->start(duration_cast<microseconds>(until - margin() - clock::now()), [this] { on_lost_alarm(); });
    return;
  }
  result why = last_failure_;
  if (!why.error) {
    // Nothing failed: a cap stopped the extensions, or none was confirmed.
    why.reason = cap_reason();
    if (why.reason.empty())
      why.reason = in_flight_ ? "the extension in flight was not confirmed before the validity ran out"
                              : "no extension was confirmed before the validity ran out";
  }
  declare_lost(why);
}

void watchdog::declare_lost(const result& why) {
  stop();
  result r = why;
  // Say why before the code turns into `lost`: the failed extension's error
  // would otherwise disappear from the message.
  if (r.reason.empty() && r.error) r.reason = "extension failed: " + r.error.message();
  r.error = make_error_code(errc::lost);
  r.elapsed = duration_cast<microseconds>(clock::now() - acquired_at_);
  {
    std::lock_guard lk(st_.mu);
    st_.held = false;
  }
  st_.lost.request_stop();
  st_.eng.telemetry().lost(st_, r);
  if (st_.opts.on_lost) {
    try {
      st_.opts.on_lost(r);
    } catch (...) {
      // A user callback must not take the loop down with it.
    }
  }
}

}  // namespace redsync::detail
