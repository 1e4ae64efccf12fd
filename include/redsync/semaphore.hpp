#pragma once

/// \file
/// `redsync::Semaphore`: at most k holders of a name across the nodes of a
/// `Redsync`, each with a fenced `permit`.

#include <redsync/context.hpp>
#include <redsync/error.hpp>
#include <redsync/export.hpp>
#include <redsync/fencing_token.hpp>
#include <redsync/semaphore_options.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stop_token>
#include <string>

namespace redsync {

namespace detail {
struct semaphore_state;
struct permit_state;
struct semaphore_test_access;
}  // namespace detail

/// A permit of a `Semaphore`: granted by a quorum of nodes until `until()`.
/// Movable, not copyable; an empty permit (default-constructed, moved from,
/// or from a failed acquisition) holds nothing. Destroying a held permit
/// releases it in the background; destroying the `Redsync` right afterwards
/// still sends that release and waits for it (up to
/// `redsync_options::shutdown_timeout`), as for a `Mutex`. The `Redsync`
/// must outlive the permit.
///
/// **Fencing.** A permit carries a slot in 0..k-1 and a token. At any moment
/// at most one live permit has a given slot, and every later permit of the
/// same slot gets a greater token (as long as the nodes that lost data
/// since are fewer than a quorum, exactly as for `Mutex::token`). Tokens of
/// different slots are not ordered. The protected resource keeps, per
/// semaphore and slot, the highest token it accepted, and rejects a write
/// whose token is lower: a holder paused past its permit's expiry is then
/// refused once the slot's next holder has written.
///
/// Thread safety: calls on one permit may come from any thread (not the
/// loop thread of an application-owned loop for the blocking ones).
class REDSYNC_API permit {
 public:
  using clock = std::chrono::steady_clock;
  using callback = std::function<void(result)>;

  permit() noexcept;
  permit(permit&& other) noexcept;
  /// Releases this permit if held (as the destructor does), then takes
  /// over `other`'s.
  permit& operator=(permit&& other) noexcept;
  permit(const permit&) = delete;
  permit& operator=(const permit&) = delete;
  ~permit();

  /// The permit's id (random, 24 characters); empty for an empty permit.
  const std::string& id() const noexcept;
  /// The permit's slot, in 0..k-1 (see the class comment); 0 when empty.
  std::uint32_t slot() const noexcept;
  /// The fencing token (see the class comment); 0 when empty.
  fencing_token token() const noexcept;
  /// End of validity on the steady clock: the start of the attempt (or of
  /// the last extension) + expiry - drift. `time_point{}` when empty.
  clock::time_point until() const;
  /// True if granted, not released, and `until()` is in the future.
  bool held() const;
  explicit operator bool() const { return held(); }
  /// True once the permit was lost under auto-extension
  /// (`semaphore_options::auto_extend`); false when empty.
  bool lost() const;
  /// Stopped when the permit is lost (as `lost()` turns true): poll it, or
  /// attach a `std::stop_callback` (it runs on the loop thread, must not
  /// block). Never stopped for an empty permit or after a normal release.
  std::stop_token lost_token() const;

  /// Removes the permit from every node; succeeds iff a quorum of nodes
  /// still had it. Sent to every node whatever `ctx` says, and again in the
  /// background to a node that does not answer, until the permit's expiry.
  /// `held()` is false once it starts, and the auto-extension stops. A
  /// permit lost under auto-extension is still released where it remains,
  /// and the call returns `lost`. Errors: expired, no_quorum, lost, not_held
  /// (empty, or already released), deadline_exceeded, cancelled.
  result release(const context& ctx = {});
  /// Pushes the expiry back to `expiry` from now on every node; on a
  /// quorum, `until()` becomes the extension's start + expiry - drift.
  /// Errors: expired (gone from too many nodes), validity_elapsed,
  /// no_quorum, lost (lost under auto-extension), not_held,
  /// deadline_exceeded, cancelled.
  result extend(const context& ctx = {});
  /// Asynchronous `release`: `done` runs once, on the loop thread, never
  /// inside the call; except on an empty permit, which has no loop: there
  /// `done` gets `not_held` at once, inside the call.
  void release_async(const context& ctx, callback done);
  /// Asynchronous `extend`, as `release_async`.
  void extend_async(const context& ctx, callback done);
  /// `release(ctx)` as a future.
  std::future<result> release_future(const context& ctx = {});
  /// `extend(ctx)` as a future.
  std::future<result> extend_future(const context& ctx = {});

 private:
  friend struct detail::permit_state;
  explicit permit(std::shared_ptr<detail::permit_state> state) noexcept;
  std::shared_ptr<detail::permit_state> state_;
};

/// The outcome of an acquisition: `outcome` (with every node's answer) and,
/// on success, the `permit`.
struct acquire_result {
  result outcome;
  /// Held on success, empty otherwise.
  redsync::permit permit;

  explicit operator bool() const noexcept { return outcome.ok(); }
  bool ok() const noexcept { return outcome.ok(); }
  /// `outcome.describe()`.
  std::string describe() const { return outcome.describe(); }
};

/// A counting semaphore: at most `permits()` holders of `name()` at once,
/// across the N nodes of a `Redsync`. Made by `Redsync::new_semaphore`;
/// movable, not copyable. The `Redsync` must outlive it and its permits.
///
/// Each node grants at most k permits of a name, at most one per slot, and
/// an acquisition needs `quorum()` nodes: the least q with q > k*N/(k+1), so
/// k+1 holders would need more grants than the nodes can give (for k = 1 a
/// majority; a majority is not enough for k >= 2, see the README).
///
/// Every node stores k with the semaphore while a permit is live, and
/// refuses a client whose k differs: such an acquisition fails with
/// `errc::permits_mismatch`, its reason naming both numbers.
///
/// A name is a Mutex's or a Semaphore's, never both at once: while a Mutex
/// holds the name (or has it reserved for a waiter) a permit is refused, and
/// while a permit is live a Mutex is; the refusal is retried like a busy
/// node's, and the call fails with `errc::kind_clash` when it was what stood
/// in the way at the end (docs/api.md, "A name is one kind at a time").
///
/// Waiting: a blocking `acquire` that is refused waits in a fair line, in
/// arrival order (its client's wall clock): a node grants a permit only
/// while fewer live waiters are ahead of the caller than permits are free.
/// It tries again when a quorum of nodes woke it (a release wakes the one
/// waiter it lets in, pub/sub) or after the retry delay, and leaves the line
/// once confirmed or given up. `try_acquire` never queues: it is behind
/// every waiter. The line is a fairness aid: at most k holders never depend
/// on it (docs/api.md, "Waiting: a fair line").
///
/// Thread safety: every call may be made from any thread at once; each
/// acquisition is its own holder with its own permit.
class REDSYNC_API Semaphore {
 public:
  using callback = std::function<void(acquire_result)>;

  /// The most permits a semaphore may have; `Redsync::new_semaphore`
  /// refuses more (`config_error`).
  static constexpr int max_permits = 1024;

  Semaphore(Semaphore&& other) noexcept;
  Semaphore& operator=(Semaphore&& other) noexcept;
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  ~Semaphore();

  /// Acquires a permit: up to `tries` attempts, each sent to every node at
  /// once, succeeding when `quorum()` nodes granted it and validity =
  /// expiry - elapsed - drift is positive. A failed attempt is undone on
  /// every node (those that did not answer included) before the next one.
  /// Errors: busy, no_quorum, permits_mismatch, kind_clash, validity_elapsed,
  /// deadline_exceeded, cancelled, shutting_down, would_deadlock. Throws
  /// `std::logic_error` on a moved-from Semaphore (so do the other calls
  /// that start an acquisition).
  acquire_result acquire(const context& ctx);
  /// One attempt of `acquire`.
  acquire_result try_acquire(const context& ctx);
  /// Asynchronous `acquire`: `done` runs once on the loop thread, never
  /// inside the call (it must not block).
  void acquire_async(const context& ctx, callback done);
  /// Asynchronous `try_acquire`.
  void try_acquire_async(const context& ctx, callback done);
  /// `acquire(ctx)` as a future.
  std::future<acquire_result> acquire_future(const context& ctx = {});
  /// `try_acquire(ctx)` as a future.
  std::future<acquire_result> try_acquire_future(const context& ctx = {});

  /// The semaphore's name (the keys are `redsync:sem:{name}` and
  /// `redsync:sem:{name}:permits`).
  const std::string& name() const noexcept;
  /// k, the number of permits.
  int permits() const noexcept;
  /// Nodes that must grant a permit.
  std::size_t quorum() const noexcept;

 private:
  friend class Redsync;
  friend struct detail::semaphore_test_access;  // test-only unsafe variants (not API)
  explicit Semaphore(std::shared_ptr<detail::semaphore_state> state);
  detail::semaphore_state& state() const;
  std::shared_ptr<detail::semaphore_state> state_;
};

}  // namespace redsync
