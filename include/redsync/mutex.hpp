#pragma once

/// \file
/// `redsync::Mutex`: one holder of a named Redlock lock.

#include <redsync/context.hpp>
#include <redsync/error.hpp>
#include <redsync/export.hpp>
#include <redsync/fencing_token.hpp>

#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace redsync {

namespace detail {
struct mutex_state;
}

/// One holder of the lock called `name()` across the nodes of a `Redsync`.
/// Made by `Redsync::new_mutex`; movable, not copyable.
///
/// Two ways to call it:
/// - with a `context` (deadline and/or cancellation), every call returns a
///   `result`: success, or the reason (`errc::busy`, `no_quorum`, ...) with
///   each node's answer. This is the primary API (go-redsync's `LockContext`,
///   `UnlockContext`, ...): `auto r = m.lock(redsync::context{});`
/// - without, `lock`/`try_lock`/`unlock`/`try_lock_for`/`try_lock_until`
///   follow the standard *Lockable*/*TimedLockable* requirements, so
///   `std::lock_guard`, `std::unique_lock` and `std::scoped_lock` work:
///   `lock()` throws `lock_error` if it cannot acquire within
///   `mutex_options::tries` (about 5 s with the defaults) where `std::mutex`
///   would block; make the mutex with `.tries = redsync::unlimited_tries` to
///   wait without a limit. `unlock()` never throws (a failed release is
///   reported to `last_result()`).
///
/// Not reentrant by default: `lock` on a mutex that already holds the lock
/// reports `errc::already_held` instead of acquiring twice. With
/// `mutex_options::reentrant`, the thread that acquired it in a blocking call
/// may lock it again with one (a hold counted locally, nothing sent; the last
/// `unlock` releases): docs/api.md, "Reentrancy".
///
/// Moved from, a `Mutex` may only be assigned to or destroyed: any other call
/// throws `std::logic_error` saying so, except the `noexcept` ones (`name()`
/// and `names()` return empty, `unlock()` does nothing). `has_state()` tells.
///
/// Thread safety: a `Mutex` is one holder; give each thread that contends for
/// a name its own `Mutex` (they are cheap). Calls on one `Mutex` are
/// serialized internally, so concurrent calls do not corrupt it, but they act
/// as the same holder (a `reentrant` mutex is re-entered only by a blocking
/// call of the thread that acquired it; another thread's `lock` reports
/// `already_held`). Blocking calls may be made from any
/// thread except the loop thread of an application-owned loop.
class REDSYNC_API Mutex {
 public:
  using clock = std::chrono::steady_clock;
  using callback = std::function<void(result)>;

  /// Takes over `other`'s lock and state; `other` is left moved-from.
  Mutex(Mutex&& other) noexcept;
  /// Releases this mutex's lock if held (as the destructor does), then takes
  /// over `other`'s.
  Mutex& operator=(Mutex&& other) noexcept;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  /// Does not block. If the lock is still held, a release is sent to every
  /// node in the background; destroying the `Redsync` right afterwards still
  /// sends it and waits for it (up to `redsync_options::shutdown_timeout`).
  ~Mutex();

  // -- primary API: a context in, a result out ------------------------------

  /// Acquires the lock: up to `tries` attempts separated by the retry delay
  /// (with `tries = redsync::unlimited_tries`, until it acquires or `ctx`
  /// ends).
  /// Each attempt sends `SET name value NX PX expiry` to every node at once and
  /// succeeds when a quorum (N/2+1) agreed and `expiry - elapsed - drift > 0`;
  /// a failed attempt is released on every node before the next one.
  /// Errors: busy, no_quorum, validity_elapsed, cancelled, deadline_exceeded,
  /// already_held, kind_clash (a Semaphore's permits hold the name: retried
  /// like busy first); with `mutex_options::reentrant`, a re-entry sends nothing
  /// and fails only with lost or expired (docs/api.md, "Reentrancy").
  result lock(const context& ctx);
  /// One attempt of `lock` (no retries).
  result try_lock(const context& ctx);
  /// Compare-and-delete on every node; succeeds iff a quorum deleted our
  /// value. Errors: taken (names the nodes), expired, no_quorum, not_held,
  /// lost, deadline_exceeded, cancelled. On a `reentrant` mutex locked more
  /// than once and still valid, it takes one hold and sends nothing. The
  /// release is sent to every node
  /// even if `ctx` has expired or is cancelled, and sent again in the
  /// background to nodes that did not answer, until they do, the next
  /// acquisition starts, or `expiry` has passed. Once the release starts,
  /// `held()` is false whatever the outcome and the next `lock` takes a new
  /// value; before that, a repeated `unlock` releases the same value again
  /// (`not_held` once a quorum confirmed a release).
  result unlock(const context& ctx);
  /// Compare-and-PEXPIRE (or SET NX with `set_nx_on_extend`) on every node;
  /// on a quorum, `until()` is recomputed as start + expiry - drift, where
  /// start is when the extension was sent (and it fails as validity_elapsed
  /// if that is already past). Errors: taken, expired, validity_elapsed,
  /// no_quorum, not_held (never acquired, or let go by `unlock`), lost (the
  /// loss was reported, even if this extension itself succeeded: its keys
  /// are then released).
  result extend(const context& ctx = {});
  /// As `extend(ctx)`, but the keys' TTL on the nodes (PEXPIRE's argument)
  /// is `duration` instead of `mutex_options::expiry` (node-redlock's
  /// `extend(ms)`): on a quorum, `until()` = start + duration - drift, with
  /// drift = duration * drift_factor + 2 ms. It may shorten the lock: from
  /// the moment it is sent, whatever its outcome, `until()` is at most that
  /// (a node that applied it keeps the key only that long).
  /// `duration` must be in (0, expiry]: a longer one is refused, because
  /// the nodes' restart guard window and fencing repair delay cover the
  /// longest expiry in use, not longer keys. Also refused with
  /// `auto_extend`, unless it equals the expiry (the watchdog extends by the
  /// expiry). Refusals throw `config_error` naming the duration, before
  /// anything is sent. A duration finer than milliseconds does not compile:
  /// cast it (`std::chrono::ceil<std::chrono::milliseconds>(d)`).
  template <class Rep, class Period>
  result extend(const std::chrono::duration<Rep, Period>& duration, const context& ctx = {}) {
    return extend_by(whole_ms(duration), ctx);
  }
  /// Checks over the network that a quorum of nodes still hold our value.
  /// Errors: taken, expired, no_quorum, not_held.
  result valid(const context& ctx = {});

  // -- standard Lockable / TimedLockable ------------------------------------

  /// Blocks until acquired, or throws `lock_error` after `tries` failed
  /// attempts: unlike `std::mutex::lock()`, with the defaults (32 tries,
  /// 50-250 ms apart) it gives up after about 5 s, so `std::lock_guard` and
  /// `std::scoped_lock` throw then. To block until acquired, make the mutex
  /// with `.tries = redsync::unlimited_tries`; to bound the wait by time
  /// instead, use `try_lock_for` (with `std::unique_lock`) or
  /// `lock(context::timeout(d))`.
  void lock();
  /// One attempt; true if acquired.
  bool try_lock();
  /// Keeps trying until `d` has passed or `tries` attempts failed, whichever
  /// comes first; true if acquired. With `tries = redsync::unlimited_tries`
  /// only `d` bounds it, as for `std::timed_mutex`.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_until(clock::now() + std::chrono::duration_cast<clock::duration>(d));
  }
  /// Keeps trying (up to `tries`) until `t`; true if acquired. See
  /// `try_lock_for`.
  bool try_lock_until(clock::time_point t);
  /// Releases; never throws. If the release fails, `last_result()` says why.
  void unlock() noexcept;

  // -- asynchronous API (callbacks run on the loop thread) --------------------
  //
  // Each `*_async(ctx, done)` does what the call of the same name does; `done`
  // gets the same result, exactly once, on the loop thread, never inside the
  // call (so it must not block: no blocking call of this library there).
  // Each `*_future(ctx)` returns that result as a `std::future`. Calls on one
  // mutex run in the order they were made.

  /// Asynchronous `lock(ctx)`.
  void lock_async(const context& ctx, callback done);
  /// Asynchronous `try_lock(ctx)`.
  void try_lock_async(const context& ctx, callback done);
  /// Asynchronous `unlock(ctx)`; the release is sent whatever `ctx` says.
  void unlock_async(const context& ctx, callback done);
  /// Asynchronous `extend(ctx)`.
  void extend_async(const context& ctx, callback done);
  /// Asynchronous `extend(duration, ctx)`; a refused duration throws here,
  /// on the caller's thread, and `done` never runs.
  template <class Rep, class Period>
  void extend_async(const std::chrono::duration<Rep, Period>& duration, const context& ctx, callback done) {
    extend_by_async(whole_ms(duration), ctx, std::move(done));
  }
  /// Asynchronous `valid(ctx)`.
  void valid_async(const context& ctx, callback done);
  /// `lock(ctx)` as a future.
  std::future<result> lock_future(const context& ctx = {});
  /// `try_lock(ctx)` as a future.
  std::future<result> try_lock_future(const context& ctx = {});
  /// `unlock(ctx)` as a future.
  std::future<result> unlock_future(const context& ctx = {});
  /// `extend(ctx)` as a future.
  std::future<result> extend_future(const context& ctx = {});
  /// `extend(duration, ctx)` as a future; a refused duration throws here.
  template <class Rep, class Period>
  std::future<result> extend_future(const std::chrono::duration<Rep, Period>& duration,
                                    const context& ctx = {}) {
    return extend_by_future(whole_ms(duration), ctx);
  }
  /// `valid(ctx)` as a future.
  std::future<result> valid_future(const context& ctx = {});

  // -- state (local, no network) --------------------------------------------

  /// The lock's name (the Redis key); the first (in sorted order) of a
  /// multi-name lock.
  const std::string& name() const noexcept;
  /// All names of the lock (one unless made by `new_multi_mutex`).
  const std::vector<std::string>& names() const noexcept;
  /// The value of the current (or last) acquisition; empty before the first.
  std::string value() const;
  /// When the validity of the current acquisition ends (steady clock);
  /// `time_point{}` if never acquired.
  clock::time_point until() const;
  /// The validity left, rounded down to whole milliseconds (`until()` minus
  /// now, printable): zero when not `held()` (never acquired, released,
  /// lost, or expired), and in the last millisecond of the validity.
  std::chrono::milliseconds remaining() const;
  /// True if acquired, not let go by `unlock` (whatever its outcome), not
  /// lost, and `until()` is still in the future.
  bool held() const;
  /// The outcome of the last call, including the standard-style ones.
  result last_result() const;
  /// True once the current acquisition was lost under auto-extension.
  bool lost() const;
  /// Stopped when the current acquisition is lost: poll it, or attach a
  /// `std::stop_callback`, to end long work early. Each acquisition gets a
  /// fresh token.
  std::stop_token lost_token() const;
  /// The fencing token of the current acquisition: strictly greater than the
  /// token of every earlier holder of this name (of each name, for a
  /// multi-name lock), as long as the nodes that lost data since that earlier
  /// token was granted are a minority. Pass it to the protected resource,
  /// which must reject a token lower than or equal to the highest it has
  /// seen. 0 before the first acquisition.
  fencing_token token() const;
  /// False once moved from (see the class comment).
  bool has_state() const noexcept { return state_ != nullptr; }

 private:
  friend class Redsync;
  explicit Mutex(std::shared_ptr<detail::mutex_state> state);
  // Durations the extension takes: whole milliseconds, no silent rounding.
  template <class Rep, class Period>
  static std::chrono::milliseconds whole_ms(const std::chrono::duration<Rep, Period>& d) {
    static_assert(std::is_convertible_v<std::chrono::duration<Rep, Period>, std::chrono::milliseconds>,
                  "redsync::Mutex::extend takes whole milliseconds: cast a finer or floating-point duration "
                  "(std::chrono::ceil<std::chrono::milliseconds>(d))");
    return d;
  }
  result extend_by(std::chrono::milliseconds duration, const context& ctx);
  void extend_by_async(std::chrono::milliseconds duration, const context& ctx, callback done);
  std::future<result> extend_by_future(std::chrono::milliseconds duration, const context& ctx);
  // The state, or std::logic_error for a moved-from Mutex.
  detail::mutex_state& state() const;
  std::shared_ptr<detail::mutex_state> state_;
};

}  // namespace redsync
