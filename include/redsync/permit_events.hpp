#pragma once

/// \file
/// The events of a `Semaphore`'s permits that an `observer` (observer.hpp)
/// hears, apart from a `Mutex`'s: acquired, released, extended, lost.

#include <redsync/error.hpp>
#include <redsync/fencing_token.hpp>

#include <cstdint>
#include <string_view>

namespace redsync {

/// Which permit of a `Semaphore` an event is about.
struct permit_info {
  /// The semaphore's name.
  std::string_view semaphore;
  /// Its k (`Semaphore::permits()`).
  int permits = 0;
  /// The permit's id (`permit::id()`); empty for a failed acquisition.
  std::string_view id;
  /// The permit's slot, in 0..k-1; 0 for a failed acquisition.
  std::uint32_t slot = 0;
  /// Its fencing token (`permit::token()`); 0 for a failed acquisition.
  fencing_token token{};
};

/// A permit acquisition (`Semaphore::acquire`, `try_acquire` and their async
/// forms) finished. Mutex acquisitions are `acquire_event`s instead.
struct permit_acquire_event {
  /// The permit granted; its semaphore's name and k only, on failure.
  permit_info permit;
  /// True for `acquire` (waits and retries), false for `try_acquire`.
  bool blocking = false;
  /// The outcome, as the caller gets it.
  const result& outcome;
};

/// A `permit::release` finished (also the release a held permit sends when
/// it is destroyed).
struct permit_release_event {
  /// The permit released.
  permit_info permit;
  /// The outcome (`errc::lost` when the permit had been lost meanwhile).
  const result& outcome;
};

/// A permit's extension finished (by `permit::extend`, or automatic).
struct permit_extend_event {
  /// The permit extended.
  permit_info permit;
  /// True for an extension made by `semaphore_options::auto_extend`.
  bool automatic = false;
  /// The outcome.
  const result& outcome;
};

/// A held permit was lost under auto-extension (the moment
/// `semaphore_options::on_lost` runs).
struct permit_lost_event {
  /// The permit lost.
  permit_info permit;
  /// `errc::lost`, with the last failed extension's per-node detail.
  const result& outcome;
};

}  // namespace redsync
