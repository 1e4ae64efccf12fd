#pragma once

/// \file
/// `redsync::guard`: holds a lock for a scope.

#include <redsync/context.hpp>
#include <redsync/error.hpp>
#include <redsync/export.hpp>
#include <redsync/mutex.hpp>

#include <chrono>
#include <stop_token>

namespace redsync {

/// Acquires a `Mutex` on construction and releases it when the scope ends.
/// Construction never throws for routine failures: test the guard.
///
/// \code
/// redsync::guard g(mutex, redsync::context::timeout(2s));
/// if (!g) return log(g.outcome().describe());
/// write_to_storage(data, g.token());          // fencing token for the resource
/// if (g.lost_token().stop_requested()) ...    // with auto_extend
/// \endcode
///
/// The destructor never throws; a failed release is in `mutex.last_result()`.
///
/// Unlike `std::lock_guard<std::mutex>`, the acquisition is bounded: by
/// `ctx`, and by `mutex_options::tries` (32 tries 50-250 ms apart by
/// default: about 5 s), after which the guard does not own the lock and
/// `outcome()` says why (`std::lock_guard<redsync::Mutex>` throws
/// `lock_error` then). To wait without a limit, make the mutex with
/// `.tries = redsync::unlimited_tries` (the context still bounds the wait).
class REDSYNC_API guard {
 public:
  /// Calls `mutex.lock(ctx)`: up to `tries` attempts, within `ctx`.
  explicit guard(Mutex& mutex, const context& ctx = {});
  /// Releases if still owned.
  ~guard();
  guard(const guard&) = delete;
  guard& operator=(const guard&) = delete;

  /// True if the lock was acquired and not yet released by `unlock`.
  bool owns_lock() const noexcept { return owns_; }
  explicit operator bool() const noexcept { return owns_; }
  /// The outcome of the acquisition.
  const result& outcome() const noexcept { return acquired_; }

  /// End of validity (steady clock); see `Mutex::until`.
  std::chrono::steady_clock::time_point until() const { return mutex_.until(); }
  /// Validity left in whole milliseconds, zero once not held; see
  /// `Mutex::remaining`.
  std::chrono::milliseconds remaining() const { return mutex_.remaining(); }
  /// Fencing token of this acquisition.
  fencing_token token() const { return mutex_.token(); }
  /// True once the lock was lost under auto-extension.
  bool lost() const { return mutex_.lost(); }
  /// Stopped when the lock is lost.
  std::stop_token lost_token() const { return mutex_.lost_token(); }

  /// Releases now and returns the outcome; the destructor then does nothing.
  result unlock(const context& ctx = {});

 private:
  Mutex& mutex_;
  result acquired_;
  bool owns_ = false;
};

}  // namespace redsync
