#pragma once

/// \file
/// Watching a `Redsync` at work: an `observer` told of every acquisition,
/// release, extension, lost lock or permit and node state change, and a `log_hook` that
/// carries the library's warnings to the application's logger. Both are set
/// in `redsync_options`; the counters any thread can read without callbacks
/// are in stats.hpp (`Redsync::stats()`).
///
/// Thread and blocking rules, for every callback here:
/// - It runs on the `Redsync`'s loop thread, the thread that does all the
///   library's I/O at that moment: the library's own thread, or a thread
///   inside a blocking call of this `Redsync` that runs the loop while it
///   waits (`redsync_options::callers_run_loop`, default true); never two
///   callbacks at once. It must not block (no blocking `Mutex` call, which
///   would return `errc::would_deadlock` there anyway; no slow I/O). Hand
///   slow work to another thread. An event about a call runs before that call's caller
///   is answered (before a blocking call returns, before an async callback).
/// - No lock of the library is held while it runs: it may call
///   `Redsync::stats()`, any `*_async` call, or make a new `Mutex`.
/// - An exception it throws is caught: the library goes on, counts it in
///   `stats_snapshot::observer_errors` and reports it through the log hook
///   (an exception from the log hook itself is only counted).
/// - Events may still arrive while the `Redsync` is being destroyed (calls
///   finishing with `errc::shutting_down`); do not call the `Redsync` then.
///   The `Redsync` holds its observer until it is gone, so an observer must
///   not own a `Mutex` of that `Redsync` past it (a `Mutex` must not outlive
///   its `Redsync`).

#include <redsync/error.hpp>
#include <redsync/export.hpp>
#include <redsync/fencing_token.hpp>
#include <redsync/permit_events.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace redsync {

/// How serious a log message is.
enum class log_level {
  /// Routine detail: a node connected, a script loaded on first use.
  debug,
  /// Worth knowing: a node reconnected, a node votes again.
  info,
  /// Needs attention: a node unreachable or excluded from the quorum, a
  /// reconnect storm, a node that lost its scripts (NOSCRIPT reload, or a
  /// function reload with `script_mode::functions`).
  warning,
  /// An observer callback threw.
  error,
};

/// "debug", "info", "warning" or "error".
REDSYNC_API std::string_view to_string(log_level l) noexcept;

/// Receives the library's log messages (one line each, no trailing newline),
/// on the loop thread, under the rules of this file. Default: none.
using log_hook = std::function<void(log_level level, std::string_view message)>;

/// A change in how a node is doing, as seen by this `Redsync`.
enum class node_state {
  /// The first connection to the node came up.
  connected,
  /// A connection to the node failed (refused, timed out, resolve error);
  /// reported once per outage. Commands fail fast as `unreachable` during
  /// the reconnect backoff.
  unreachable,
  /// A connection came up again after the node was unreachable, or after a
  /// connection dropped.
  reconnected,
  /// The node said yes to an acquisition but its vote did not count
  /// (`node_status::excluded`: the restart guard, the repair of its fencing
  /// counter, or a server that can never vote, such as a Redis Cluster node
  /// listed as `redis://`, whatever it answers); reported when it starts.
  excluded,
  /// An excluded node's yes counts again.
  voting,
  /// A shard of a cluster member has a new master: a map read found the
  /// slots of a master that is no master any more served by one that was
  /// none before (a replica promoted). `node_event::shard` is the new
  /// master, `detail` the old one. Its yes for those slots does not count
  /// until the restart guard has passed (`excluded` follows on its first
  /// yes).
  failover,
};

/// "connected", "unreachable", "reconnected", "excluded", "voting" or
/// "failover".
REDSYNC_API std::string_view to_string(node_state s) noexcept;

/// An acquisition (`lock`, `try_lock` and their async forms) finished.
struct acquire_event {
  /// The lock's names (one, or several sorted for a multi-name lock).
  std::span<const std::string> names;
  /// True for `lock` (waits and retries), false for `try_lock`.
  bool blocking = false;
  /// The outcome, as the caller gets it: error, per-node detail of the last
  /// attempt, `attempts`, and `elapsed`, the wait from the call to its end.
  const result& outcome;
  /// The fencing token on success, else `fencing_token{}` (0); the same
  /// type as `Mutex::token()`, printable with `operator<<`.
  fencing_token token{};
  /// True for an `RWMutex` reader's (a shared hold), false for a writer's
  /// or any other `Mutex`'s.
  bool shared = false;
};

/// An `unlock` finished.
struct release_event {
  /// The lock's names.
  std::span<const std::string> names;
  /// The outcome (`errc::lost` when the lock had been lost meanwhile).
  const result& outcome;
  /// True for an `RWMutex` reader's (a shared hold), false for a writer's
  /// or any other `Mutex`'s.
  bool shared = false;
};

/// An extension finished (by `extend`, or automatic).
struct extend_event {
  /// The lock's names.
  std::span<const std::string> names;
  /// True for an extension made by `mutex_options::auto_extend`.
  bool automatic = false;
  /// The outcome.
  const result& outcome;
  /// True for an `RWMutex` reader's (a shared hold), false for a writer's
  /// or any other `Mutex`'s.
  bool shared = false;
};

/// A held lock was lost under auto-extension (the moment `on_lost` runs).
struct lost_event {
  /// The lock's names.
  std::span<const std::string> names;
  /// `errc::lost`, with the last failed extension's per-node detail.
  const result& outcome;
  /// True for an `RWMutex` reader's (a shared hold), false for a writer's
  /// or any other `Mutex`'s.
  bool shared = false;
};

/// A node's state changed.
struct node_event {
  /// The node's index, in the order the `Redsync` was given its nodes.
  std::size_t node = 0;
  /// Its address (`host:port` or `unix:/path`).
  std::string_view address;
  /// What happened.
  node_state state = node_state::connected;
  /// Why: the connection error for `unreachable`, the reason for
  /// `excluded`, the old master for `failover`; may be empty.
  std::string_view detail;
  /// For an event about one shard of a cluster member: its master
  /// (`host:port`); empty for a standalone node and for an event about the
  /// whole member. A shard's `excluded` and `voting` come in addition to
  /// the member's own (which say when the member's last yes changed).
  std::string_view shard{};
};

/// Receives the events of one `Redsync` (set it in
/// `redsync_options::observer`). Override the methods you need; the others do
/// nothing. Every method runs on the loop thread under the rules of this
/// file; an event's references are valid only during the call.
///
/// An abstract class held by `shared_ptr`, rather than a struct of
/// `std::function`s: one object keeps its state (a metrics registry, a
/// logger) across all events, the library checks one pointer per event (no
/// allocation and no call at all when no observer is set), and the
/// `shared_ptr` keeps it alive as long as the loop may still call it.
///
/// \code
/// struct slow_locks : redsync::observer {
///   void on_acquire(const redsync::acquire_event& e) override {
///     if (e.outcome.elapsed > 1s) queue_warning(e.names[0]);  // must not block
///   }
/// };
/// redsync::Redsync rs(uris, {.observer = std::make_shared<slow_locks>()});
/// \endcode
class REDSYNC_API observer {
 public:
  virtual ~observer();
  /// An acquisition finished, successfully or not.
  virtual void on_acquire(const acquire_event& e);
  /// An unlock finished.
  virtual void on_release(const release_event& e);
  /// An extension finished, by hand or automatic.
  virtual void on_extend(const extend_event& e);
  /// A held lock was lost (before `mutex_options::on_lost` runs).
  virtual void on_lost(const lost_event& e);
  /// A node's state changed.
  virtual void on_node(const node_event& e);
  /// A permit acquisition finished, successfully or not.
  virtual void on_permit_acquire(const permit_acquire_event& e);
  /// A permit's release finished.
  virtual void on_permit_release(const permit_release_event& e);
  /// A permit's extension finished, by hand or automatic.
  virtual void on_permit_extend(const permit_extend_event& e);
  /// A held permit was lost (before `semaphore_options::on_lost` runs).
  virtual void on_permit_lost(const permit_lost_event& e);
};

}  // namespace redsync
