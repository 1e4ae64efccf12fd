// When the supervisor ends the command's process group on its own because
// the lock's validity is running out (see supervisor.hpp). Pure arithmetic,
// checked at compile time below for the defaults and for short ttls.
//
// The tool hands the supervisor each validity end it learns, Mutex::until()
// (steady_clock, which is CLOCK_MONOTONIC on Linux, the supervisor's clock).
// If the next one has not arrived by `until - term_lead`, the supervisor
// treats the lock as lost: SIGTERM to the group then, SIGKILL at
// `until - kill_margin` at the latest, so that no process of the group runs
// once another client may hold the lock.
//
// Why these margins. An automatic extension sent at s moves the validity end
// to s + ttl - drift (drift = ttl * drift_factor + 2 ms, the library's
// allowance for clock rates); the next is sent ttl/3 after the previous one
// completes. A healthy tool sees the new until() within one `poll` and
// passes it on at once, so the next validity end reaches the supervisor
// within ttl/3 + poll + two extension round trips of the previous one being
// sent. Between that moment (ignoring the round trips) and the current
// validity end lies `gap = ttl - drift - ttl/3 - poll`; the SIGTERM sits at
// its middle at the earliest, so the round trips and any scheduling delay
// have half of the gap (about ttl/3) before a healthy tool could trigger it,
// and the command gets up to the other half as its grace. --kill-grace
// shortens the lead, never lengthens it: the SIGKILL must land before the
// validity end, whatever the grace. The kill margin (50 ms, or ttl/10 for a
// ttl under 500 ms) covers the supervisor waking late and the kernel
// delivering SIGKILL to every process of the group; until() already
// excludes the drift.
//
// The cost: when extensions fail for a while (nodes slow or down) but one
// could still land in the last part of the validity, the supervisor ends the
// command anyway: a command that outlives its lock is worse than one ended a
// little early.
#pragma once

#include <algorithm>
#include <chrono>

namespace redsync::cli {

struct deadline_margins {
  /// How often the tool looks for a newer Mutex::until() while the command
  /// runs: ttl/40, at most 500 ms, at least 1 ms.
  std::chrono::microseconds poll{0};
  /// SIGTERM to the group this long before the validity end when no newer
  /// one arrived: min(--kill-grace, gap/2), at least kill_margin.
  std::chrono::microseconds term_lead{0};
  /// SIGKILL to the group this long before the validity end, at the latest:
  /// min(50 ms, ttl/10).
  std::chrono::microseconds kill_margin{0};
};

/// The library's clock drift allowance: ttl * drift_factor + 2 ms.
constexpr std::chrono::microseconds drift_of(std::chrono::milliseconds ttl, double drift_factor) {
  const std::chrono::microseconds ttl_us = ttl;
  return std::chrono::microseconds{static_cast<std::chrono::microseconds::rep>(
             static_cast<double>(ttl_us.count()) * drift_factor)} +
         std::chrono::microseconds{2000};
}

/// The margins for a lock of `ttl` with the library's drift allowance
/// `drift_factor` and the tool's --kill-grace.
constexpr deadline_margins margins_for(std::chrono::milliseconds ttl, double drift_factor,
                                       std::chrono::milliseconds kill_grace) {
  using std::chrono::microseconds;
  const microseconds ttl_us = ttl;
  const microseconds drift = drift_of(ttl, drift_factor);
  deadline_margins m;
  m.poll = std::clamp(ttl_us / 40, microseconds{1000}, microseconds{500'000});
  m.kill_margin = std::min(microseconds{50'000}, ttl_us / 10);
  const microseconds gap = ttl_us - drift - ttl_us / 3 - m.poll;
  m.term_lead = std::max(m.kill_margin, std::min(microseconds(kill_grace), gap / 2));
  return m;
}

/// True if a tool whose extensions each take `round_trip` never makes the
/// supervisor act: the next validity end arrives before `until - term_lead`.
constexpr bool healthy_tool_is_left_alone(std::chrono::milliseconds ttl, double drift_factor,
                                          std::chrono::milliseconds kill_grace,
                                          std::chrono::milliseconds round_trip) {
  using std::chrono::microseconds;
  const deadline_margins m = margins_for(ttl, drift_factor, kill_grace);
  const microseconds ttl_us = ttl;
  const microseconds drift = drift_of(ttl, drift_factor);
  const microseconds next_arrives = round_trip + ttl_us / 3 + round_trip + m.poll;
  return next_arrives < ttl_us - drift - m.term_lead;
}

namespace deadline_checks {
using namespace std::chrono_literals;
constexpr bool within(std::chrono::microseconds d, std::chrono::microseconds lo,
                      std::chrono::microseconds hi) {
  return lo <= d && d <= hi;
}
// The defaults: SIGTERM about 2.5 s and SIGKILL 50 ms before the validity
// end; a healthy tool is left alone even when every extension takes the
// library's whole per-node timeout (ttl/20).
static_assert(within(margins_for(8s, 0.01, 5s).term_lead, 2500ms, 2550ms));
static_assert(margins_for(8s, 0.01, 5s).kill_margin == 50ms);
static_assert(healthy_tool_is_left_alone(8s, 0.01, 5s, 400ms));
// Short ttls: SIGTERM about 315 ms (1 s) and 630 ms (2 s) before the end;
// a healthy tool is left alone even with three times the per-node timeout.
static_assert(within(margins_for(1s, 0.01, 5s).term_lead, 310ms, 320ms));
static_assert(within(margins_for(2s, 0.01, 5s).term_lead, 625ms, 635ms));
static_assert(healthy_tool_is_left_alone(1s, 0.01, 5s, 150ms));
static_assert(healthy_tool_is_left_alone(2s, 0.01, 5s, 300ms));
// A shorter grace is kept; a zero grace sends SIGTERM and SIGKILL together.
static_assert(margins_for(8s, 0.01, 1s).term_lead == 1s);
static_assert(margins_for(8s, 0.01, 0s).term_lead == 50ms);
// A large drift factor leaves little gap, but a healthy tool is still left alone.
static_assert(healthy_tool_is_left_alone(1s, 0.5, 5s, 10ms));
// The SIGKILL always precedes the validity end and never the SIGTERM.
static_assert(margins_for(100ms, 0.01, 5s).kill_margin == 10ms);
static_assert(margins_for(100ms, 0.01, 5s).term_lead >= margins_for(100ms, 0.01, 5s).kill_margin);
static_assert(margins_for(3ms, 0.0, 5s).kill_margin > 0us);
}  // namespace deadline_checks

}  // namespace redsync::cli
