#pragma once

/// \file
/// How a caller bounds a call: an absolute deadline and a cancellation token.

#include <redsync/export.hpp>

#include <chrono>
#include <stop_token>

namespace redsync {

/// Bounds one call (`lock`, `extend`, `unlock`, ...), in the spirit of Go's
/// `context.Context`: an absolute `deadline` on the steady clock and a
/// `std::stop_token` that cancels the call when its `std::stop_source` is
/// asked to stop.
///
/// A call that hits its deadline reports `errc::deadline_exceeded`; one that is
/// cancelled reports `errc::cancelled`. Neither ever skips cleanup: the release
/// after a failed attempt and the release in `unlock` still go out to every
/// node, bounded by the per-node command timeout, not by the context.
///
/// \code
/// std::stop_source stop;
/// auto r = mutex.lock(redsync::context::timeout(2s).with(stop.get_token()));
/// if (r.is(redsync::errc::cancelled)) { ... }          // or r.error == redsync::errc::cancelled
/// \endcode
struct context {
  using clock = std::chrono::steady_clock;

  /// No deadline by default.
  clock::time_point deadline = clock::time_point::max();
  /// No cancellation by default.
  std::stop_token stop{};

  /// A context that expires `d` from now.
  static context timeout(clock::duration d) { return context{clock::now() + d, {}}; }
  /// A context that expires at `t`.
  static context until(clock::time_point t) { return context{t, {}}; }
  /// A context cancelled through `token`.
  static context cancellable(std::stop_token token) {
    return context{clock::time_point::max(), std::move(token)};
  }
  /// This context, also cancelled through `token`.
  context with(std::stop_token token) const { return context{deadline, std::move(token)}; }
};

}  // namespace redsync
