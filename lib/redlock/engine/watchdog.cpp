// Automatic extension of a held lock or permit and the lost signal.

#include "redlock/engine/watchdog.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;

watchdog::watchdog(engine& eng, holder& h, watch_settings s)
    : eng_(eng),
      holder_(h),
      settings_(std::move(s)),
      interval_(settings_.interval > std::chrono::milliseconds::zero() ? microseconds(settings_.interval)
                                                                       : microseconds(settings_.expiry) / 3) {
}

watchdog::~watchdog() {
  stop();
}

void watchdog::start(clock::time_point acquired_at) {
  stop();
  active_ = true;
  in_flight_ = false;
  extensions_ = 0;
  acquired_at_ = acquired_at;
  eng_.add_task(this);
  next_ = loop_timer::create(eng_.loop().loop());
  alarm_ = loop_timer::create(eng_.loop().loop());
  schedule_extension(interval_);
  arm_lost_alarm();
}

void watchdog::stop() {
  if (!active_) return;
  active_ = false;
  eng_.remove_task(this);
  next_->close();
  alarm_->close();
  next_ = alarm_ = nullptr;
}

bool watchdog::cap_reached() const {
  return !cap_reason().empty();
}

std::string watchdog::cap_reason() const {
  if (settings_.max_extensions > 0 && extensions_ >= settings_.max_extensions)
    return fmt::format("max_extensions ({}) reached", settings_.max_extensions);
  if (settings_.max_hold > std::chrono::milliseconds::zero() &&
      clock::now() - acquired_at_ >= settings_.max_hold)
    return fmt::format("max_hold ({} ms) reached", settings_.max_hold.count());
  return {};
}

void watchdog::schedule_extension(microseconds after) {
  next_->start(std::max(after, microseconds::zero()), [this] { extend_now(); });
}

void watchdog::extend_now() {
  if (!active_ || in_flight_) return;
  if (cap_reached()) return;  // let it run out; the alarm reports the loss
  in_flight_ = true;
  holder_.extend_automatically();
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
    // So many nodes say the key is gone or someone else's that no quorum
    // of nodes can still hold it: nothing to retry.
    return declare_lost(r);
  }
  // Retry soon while an extension started now could still land in time.
  const clock::time_point until = holder_.valid_until();
  const auto retry_in = std::max(microseconds(1000), interval_ / 10);
  if (clock::now() + retry_in + settings_.timeout + margin() < until) {
    schedule_extension(retry_in);
  } else {
    declare_lost(r);
  }
}

// Slack for a loaded loop (timers firing late, callbacks queued): the lost
// signal must come before `until`, not merely around it.
microseconds watchdog::margin() const {
  return std::max(microseconds(2000), microseconds(settings_.expiry) / 50);
}

void watchdog::arm_lost_alarm() {
  const clock::time_point until = holder_.valid_until();
  final_alarm_ = false;
  const auto at = until - settings_.timeout - margin();
  alarm_->start(duration_cast<microseconds>(at - clock::now()), [this] { on_lost_alarm(); });
}

void watchdog::on_lost_alarm() {
  if (!active_) return;
  if (in_flight_ && !final_alarm_) {
    // An extension in flight normally completes within the timeout, so
    // before `until`, and decides. If it has not by `until - margin`, the
    // lock is reported lost anyway: better a false alarm than a late one.
    const clock::time_point until = holder_.valid_until();
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
  // Copied first: from mark_lost() on, the holder (and with it this
  // watchdog) may be gone (a stop_callback on the lost token, or a thread
  // that saw lost(), dropped its last handle), and so may it in on_lost.
  // Nothing below touches a member.
  const auto on_lost = settings_.on_lost;
  holder_.mark_lost(r);
  if (on_lost) {
    try {
      on_lost(r);
    } catch (...) {
      // A user callback must not take the loop down with it.
    }
  }
}

}  // namespace redsync::detail
