#pragma once

/// \file
/// Errors and outcomes. Routine outcomes (busy, no quorum, expired, cancelled,
/// deadline exceeded) are values: a `redsync::result` carrying a
/// `std::error_code` of the `redsync` category plus what every node answered.
/// Exceptions are reserved for programmer errors (`config_error`) and for the
/// standard *Lockable* `lock()`, which by contract must throw (`lock_error`).

#include <redsync/export.hpp>

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace redsync {

/// Why a call did not succeed. Zero is success.
enum class errc {
  /// Another holder has the lock on enough nodes that this attempt could not
  /// win: without them, the answering nodes would have made a quorum.
  busy = 1,
  /// Fewer than a quorum of nodes agreed, mainly because nodes failed,
  /// timed out or were unreachable, or because nodes that agreed do not vote
  /// yet (`node_status::excluded`: the restart guard, or the repair of their
  /// fencing counter, after they restarted or lost data). The per-node detail
  /// says which; `result::describe()` names the excluded ones first.
  no_quorum,
  /// A quorum agreed, but `expiry - elapsed - drift` was already <= 0, so the
  /// lock was not safe to use (it has been released again).
  validity_elapsed,
  /// unlock/extend/valid: our value is gone from so many nodes that no
  /// quorum of them can still hold it (the lock expired and nobody else took
  /// it). When the nodes that did not answer could still make a quorum with
  /// those that said "ours", the error is no_quorum instead: we cannot tell.
  /// Also a re-entry (`mutex_options::reentrant`) after `until()` passed.
  expired,
  /// unlock/extend/valid: as expired, and at least one node holds another
  /// holder's value (redsync's ErrTaken; see `result::nodes`).
  taken,
  /// The call's `std::stop_token` was triggered.
  cancelled,
  /// The call's deadline passed before it could succeed.
  deadline_exceeded,
  /// The lock was lost while held under auto-extension (an extension missed
  /// its quorum or validity ran out first); also a re-entry
  /// (`mutex_options::reentrant`) after that.
  lost,
  /// unlock/extend/valid on a mutex that does not hold the lock.
  not_held,
  /// A blocking call was made on the loop thread, where it would deadlock.
  would_deadlock,
  /// The `Redsync` is being destroyed.
  shutting_down,
  /// lock/try_lock on a mutex that already holds the lock: a mutex is not
  /// reentrant unless made with `mutex_options::reentrant`, and then only on
  /// the thread that acquired it (docs/api.md, "Reentrancy").
  already_held,
  /// A semaphore's acquisition: nodes store another number of permits for
  /// the name than this `Semaphore` was made with (its holders agreed on
  /// it); `result::reason` names both numbers.
  permits_mismatch,
  /// An acquisition: the name is held as the other kind of lock on so many
  /// nodes that no quorum was possible without them: a Mutex's name held by
  /// a Semaphore's permits, or a Semaphore's name held (or reserved for a
  /// waiter) by a Mutex. One name is never both at once on a node. Like
  /// `busy`, each attempt counts as a refusal and is retried while tries and
  /// the deadline allow (the other kind's holder may let go); this is the
  /// error when the last attempt was refused for this reason.
  /// `result::reason` names the name and the kind, e.g. `"jobs" is held as
  /// a semaphore`, and each such node's `message` says the same.
  kind_clash,
};

/// The `redsync` error category.
REDSYNC_API const std::error_category& category() noexcept;

/// Makes `std::error_code{e, redsync::category()}`.
REDSYNC_API std::error_code make_error_code(errc e) noexcept;

/// The enumerator's name: "busy", "no_quorum", ... ("unknown" otherwise).
/// For messages use `make_error_code(e).message()`.
REDSYNC_API std::string_view to_string(errc e) noexcept;

/// What one node did during the last attempt of a call.
enum class node_status {
  /// The node did what was asked (SET applied, key deleted, TTL extended,
  /// value matched).
  ok,
  /// The key holds another holder's value.
  taken,
  /// The key does not exist (expired, released, or never set).
  missing,
  /// The server answered with an error reply; see `node_result::server_error`.
  reply_error,
  /// No answer within the per-node command timeout.
  timeout,
  /// Could not connect, or the connection dropped while the command was in
  /// flight.
  unreachable,
  /// The call returned before this node answered (fail-fast, cancellation or
  /// deadline); its answer, if any, was not counted.
  not_awaited,
  /// The node was deliberately left out of the quorum (for example because it
  /// restarted recently); `message` says why.
  excluded,
};

/// Returns "ok", "taken", "missing", ... for `s`.
REDSYNC_API std::string_view to_string(node_status s) noexcept;

/// The class of a server error reply, from its first word.
enum class server_error {
  none,
  wrongtype,  ///< WRONGTYPE: the key holds a value of another type.
  noauth,     ///< NOAUTH: authentication required.
  wrongpass,  ///< WRONGPASS / invalid password.
  noperm,     ///< NOPERM: ACL user lacks a permission.
  oom,        ///< OOM: maxmemory reached.
  readonly,   ///< READONLY: the node is a replica.
  loading,    ///< LOADING: the node is loading its dataset.
  busy,       ///< BUSY: a script is running.
  noscript,   ///< NOSCRIPT (only after the EVAL fallback also failed).
  other,      ///< Anything else; see the message.
};

/// One node's part of a call's outcome.
struct node_result {
  /// The node's address as given (`host:port` or `unix:/path`).
  std::string address;
  /// What the node did; `not_awaited` until it answered.
  node_status status = node_status::not_awaited;
  /// For `reply_error`: the class of the server's error.
  server_error error_class = server_error::none;
  /// The server's error message, or what went wrong with the transport;
  /// empty when the node answered normally.
  std::string message;
  /// Time from sending the command to its answer (or to giving up on it).
  std::chrono::microseconds latency{0};
  /// On a cluster member: the master (`host:port`) that gave the answer,
  /// after every redirection; empty for a standalone node and when no
  /// master was asked (no slot map). For a multi-name lock whose names span
  /// several slots, the master of the answer the member's answer was
  /// made from.
  std::string shard{};
};

/// The outcome of a call: success, or why not, with every node's answer from
/// the last attempt. Cheap to test: `if (!r)`, `r.busy()`.
struct REDSYNC_API result {
  /// Empty on success; otherwise an `errc` of `redsync::category()`.
  std::error_code error;
  /// Each node's answer in the last attempt, in node order.
  std::vector<node_result> nodes;
  /// How many attempts were made (acquisition with retries), at least 1 when
  /// any command was sent.
  int attempts = 0;
  /// Wall time of the whole call, on the steady clock. For `errc::lost`
  /// (`on_lost`, the observer's `lost_event`): how long the lock was held.
  std::chrono::microseconds elapsed{0};
  /// Why, when neither `error` nor the nodes say it: for `errc::lost`, the
  /// cause (`max_extensions (2) reached`, `max_hold (5000 ms) reached`,
  /// `extension failed: no quorum: too few nodes agreed`, ...). Empty
  /// otherwise. `describe()` shows it after the error's message.
  std::string reason{};

  /// True on success.
  explicit operator bool() const noexcept { return !error; }
  /// True on success.
  bool ok() const noexcept { return !error; }
  /// True when the call failed with `e`: `if (r.is(redsync::errc::no_quorum))`.
  /// The same as `r.error == e` (a `std::error_code` compares with an `errc`);
  /// `is(errc{})` is never true (success is `ok()`).
  bool is(errc e) const noexcept { return error && error == make_error_code(e); }
  /// True when the lock is held by somebody else (`errc::busy`).
  bool busy() const noexcept;
  /// Addresses of the nodes whose status is `s`.
  std::vector<std::string> nodes_with(node_status s) const;
  /// One line for logs: the error and a summary of each node.
  std::string describe() const;
};

/// Thrown at construction for a bad configuration or address; the message
/// names the offending field and value.
class REDSYNC_API config_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Thrown by the standard-library-style `Mutex::lock()` when the lock cannot
/// be acquired; carries the full outcome. `what()` is `outcome().describe()`
/// (the reason once, e.g. `lock is held by another holder after 32 attempts
/// in 7012.345 ms [...]`), `code()` its error (`no_quorum` if, impossibly,
/// it had none).
class REDSYNC_API lock_error : public std::system_error {
 public:
  /// Wraps a failed outcome.
  explicit lock_error(result r);
  /// The failed call's outcome, with every node's answer.
  const redsync::result& outcome() const noexcept { return result_; }
  /// `outcome().describe()`.
  const char* what() const noexcept override;

 private:
  redsync::result result_;
  // std::system_error's own what() is "<what_arg>: <code().message()>",
  // which would say the reason twice.
  std::string what_;
};

/// Writes `to_string(e)`.
REDSYNC_API std::ostream& operator<<(std::ostream& out, errc e);
/// Writes `r.describe()`.
REDSYNC_API std::ostream& operator<<(std::ostream& out, const result& r);
/// Writes `to_string(s)`.
REDSYNC_API std::ostream& operator<<(std::ostream& out, node_status s);

}  // namespace redsync

template <>
struct std::is_error_code_enum<redsync::errc> : std::true_type {};
