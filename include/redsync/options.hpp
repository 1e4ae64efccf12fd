#pragma once

/// \file
/// Configuration: how to reach each node, how the `Redsync` runs, and how each
/// `Mutex` behaves. Every field documents its unit and default; everything is
/// validated once, at construction, and a bad value throws `config_error`
/// naming the field and the value.

#include <redsync/error.hpp>
#include <redsync/export.hpp>
#include <redsync/observer.hpp>
#include <redsync/retries.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct uv_loop_s;

namespace redsync {

/// TLS to one node (`rediss://`). Every path is read once, when the
/// `Redsync` is constructed; a path that cannot be read, or a key that does
/// not match its certificate, throws `config_error` naming the field and the
/// path. The TLS handshake counts against `redsync_options::connect_timeout`.
///
/// Field order (designated initializers must follow it): `enabled`,
/// `ca_file`, `ca_dir`, `cert_file`, `key_file`, `server_name`,
/// `insecure_skip_verify`.
struct tls_options {
  /// Talk TLS to the node. Default false (plain TCP); `rediss://` URIs set it.
  bool enabled = false;
  /// PEM file of the CA certificates that may sign the server's certificate.
  /// Default empty: with `ca_dir` also empty, the system's trust store
  /// (OpenSSL's default paths, /etc/ssl/certs on Debian).
  std::string ca_file{};
  /// Directory of PEM CA certificates: every certificate in each of its
  /// regular files is read when the Redsync is constructed (no hashed names
  /// needed). Default empty; may be combined with `ca_file`.
  std::string ca_dir{};
  /// PEM file of the client certificate (chain) for mutual TLS. Default
  /// empty = no client certificate. Needs `key_file`.
  std::string cert_file{};
  /// PEM file of the private key of `cert_file`. Default empty. Needs
  /// `cert_file`.
  std::string key_file{};
  /// Name sent as SNI and checked against the server's certificate. Default
  /// empty = `node_options::host`. An IP address is checked against the
  /// certificate's IP addresses and sends no SNI.
  std::string server_name{};
  /// DANGER, for test setups only: skip every check of the server's
  /// certificate (its CA, its name, its dates). The traffic is encrypted but
  /// anyone on the path can impersonate the node and read or forge every
  /// lock. Default false.
  bool insecure_skip_verify = false;
};

/// How to reach one Redis master.
///
/// Field order (designated initializers must follow it): `host`, `port`,
/// `unix_path`, `username`, `password`, `db`, `tls`.
struct REDSYNC_API node_options {
  /// TCP host name or address. Default "127.0.0.1". Ignored with `unix_path`.
  std::string host = "127.0.0.1";
  /// TCP port, 1..65535. Default 6379.
  int port = 6379;
  /// Unix socket path; when set, the node is reached over it, not TCP.
  std::string unix_path{};
  /// ACL user name (Redis 6+); empty = the default user.
  std::string username{};
  /// Password for AUTH; empty = no AUTH.
  std::string password{};
  /// Logical database for SELECT, >= 0. Default 0.
  int db = 0;
  /// TLS (`rediss://`). Default: off. TCP only (not with `unix_path`).
  tls_options tls{};

  /// Parses `redis://[user[:password]@]host[:port][/db]`,
  /// `rediss://[user[:password]@]host[:port][/db][?param=value&...]` (TLS;
  /// parameters `ca`, `ca_dir`, `cert`, `key`, `server_name`, `insecure`,
  /// each once, percent-decoded; `insecure` takes `true` or `false`) or
  /// `unix:///path/redis.sock[?db=N]` (user/password percent-decoded; IPv6
  /// hosts in brackets). Throws `config_error` naming the URI and the problem
  /// (an unknown parameter by its name).
  static node_options parse(std::string_view uri);

  /// `host:port` or `unix:/path`, as used in results and messages.
  std::string address() const;
};

/// One member of the Redlock set, as a URI in `Redsync`'s list names it: a
/// single node (any form `node_options::parse` takes) or a whole Redis
/// Cluster named by seed nodes,
/// `redis+cluster://[user[:password]@]host[:port][,host[:port]...]` or
/// `rediss+cluster://...` with the `rediss://` parameters (docs/cluster.md).
struct REDSYNC_API member_options {
  /// The node, or the cluster's seeds in the order given, without repeats.
  std::vector<node_options> seeds;
  /// True for a cluster member.
  bool cluster = false;

  /// Parses either form, exactly as `Redsync`'s constructor does. Throws
  /// `config_error` naming the URI (passwords shown as "***") and the problem.
  static member_options parse(std::string_view uri);
};

/// How the library's Lua scripts run on the nodes.
enum class script_mode {
  /// `EVALSHA`, then `EVAL` when the node's script cache lacks the script.
  /// Needs Redis >= 5.0 and the ACL rights `+evalsha +eval`.
  eval,
  /// Redis Functions: each script is a function library (named after the
  /// SHA1 of its source), called with `FCALL` and loaded with
  /// `FUNCTION LOAD REPLACE` on first use on each node, or again when the
  /// node lost it (restart without persistence, `FUNCTION FLUSH`). Needs
  /// Redis >= 7.0 and the ACL rights `+fcall +function|load`, so operators
  /// can deny `EVAL`/`EVALSHA`.
  functions,
};

/// How a `Redsync` talks to its nodes. Every option: docs/options.md.
///
/// Field order (designated initializers must follow it): `pool_size`,
/// `connect_timeout`, `reconnect_backoff_min`, `reconnect_backoff_max`,
/// `loop`, `callers_run_loop`, `restart_guard`, `restart_guard_window`, `shutdown_timeout`,
/// `script_mode`, `observer`, `log`.
struct redsync_options {
  /// Connections per node, >= 1. Default 1: commands are pipelined, so one
  /// connection carries many concurrent calls. Calls on the same lock name
  /// always use the same connection, so the server runs them in send order.
  std::size_t pool_size = 1;
  /// Time allowed to establish a connection, the TLS handshake included.
  /// Default 1 s. The Redis handshake (AUTH/SELECT) is pipelined with the
  /// first command and bounded by that command's timeout.
  std::chrono::milliseconds connect_timeout = std::chrono::milliseconds{1000};
  /// Backoff before reconnecting a dropped connection: starts at `min`,
  /// doubles per failure up to `max`. During backoff, commands to the node fail
  /// at once as `unreachable`. Defaults 20 ms and 1 s.
  std::chrono::milliseconds reconnect_backoff_min = std::chrono::milliseconds{20};
  std::chrono::milliseconds reconnect_backoff_max = std::chrono::milliseconds{1000};
  /// Run on this libuv loop, owned by the application, instead of on a loop
  /// thread owned by the `Redsync` (default: nullptr = own thread). With an
  /// external loop, blocking calls must not be made from the loop's thread
  /// (they return `errc::would_deadlock`); use the `*_async` calls there.
  /// Construct the `Redsync` on the loop's thread or before the loop runs:
  /// it adds handles to the loop, which libuv allows from no other thread.
  uv_loop_s* loop = nullptr;
  /// Let a thread inside a blocking call run the library's own loop while it
  /// waits, when no other thread is running it (default true). The call's
  /// round trips then cost no thread hop (no wake-up of the loop thread, no
  /// wake-up of the caller). The price: while it waits, that thread runs
  /// whatever falls due on the loop, so observer and log callbacks,
  /// `on_lost` and the `*_async` callbacks may run on a thread that is inside
  /// a blocking call of this `Redsync` (never on one that is not, never two
  /// at once). false: they all run on the library's thread, and each
  /// blocking round trip hops to it and back. Ignored with `loop` (an
  /// application's loop is run by the application).
  bool callers_run_loop = true;
  /// Guard against restarted, replaced or emptied nodes (the Redis spec's
  /// delayed restart, done by the clients). Default true. Each node keeps a
  /// record stamped with its server's run_id when a client first verified
  /// it; a node whose record does not name its current run_id (restart,
  /// replacement, data loss, or a brand-new node) may have lost lock keys, so
  /// its "yes" does not count (`node_status::excluded`, with the reason) until
  /// its record has been repaired and stamped and `restart_guard_window` has
  /// passed since the stamp. With the guard off only the window is skipped:
  /// a node still votes only once its record (the fencing counter) is
  /// verified. Note that a fresh cluster therefore grants no lock until the
  /// window has passed after the first client met it.
  bool restart_guard = true;
  /// The least time a node that restarted, was replaced or lost its data is
  /// kept out of every quorum (restart guard on), and the least repair delay
  /// of its fencing counter (always). The longest expiry of this
  /// `Redsync`'s mutexes and the longest expiry recorded on the nodes by any
  /// client's acquisitions also count; set this when a client with a longer
  /// expiry may not have locked yet. Default 0. >= 0.
  std::chrono::milliseconds restart_guard_window = std::chrono::milliseconds{0};
  /// How long destroying the `Redsync` may wait, >= 0. Default 2 s. Releases
  /// still due at destruction (a `Mutex` destroyed while holding just
  /// before its `Redsync`, an acquisition abandoned in flight) are sent and
  /// their replies awaited for at most this long before the connections
  /// close; a node that does not answer by then keeps the key until its
  /// expiry. 0 = close at once (releases not yet written are dropped).
  std::chrono::milliseconds shutdown_timeout = std::chrono::milliseconds{2000};
  /// How the scripts run: `script_mode::eval` (default) or
  /// `script_mode::functions` (Redis >= 7). A node below the mode's minimum
  /// Redis version does not vote, and says why.
  redsync::script_mode script_mode = redsync::script_mode::eval;
  /// Told of every acquisition, release, extension, lost lock and node state
  /// change, on the loop thread (observer.hpp: must not block, may throw).
  /// Default nullptr: no events, and no cost beyond the counters of
  /// `Redsync::stats()`.
  std::shared_ptr<redsync::observer> observer{};
  /// Receives the library's warnings (a node unreachable or excluded, a
  /// reconnect storm, scripts reloaded on a node) and less serious messages,
  /// on the loop thread (observer.hpp). Default empty: nothing is logged.
  redsync::log_hook log{};
};

// Every field has a default member initializer, so designated initializers
// such as `{.expiry = 10s}` compile cleanly under -Wextra -Werror.

/// How a `Mutex` acquires, extends and releases. Defaults match go-redsync v4.
/// Every option, its type, default and meaning: docs/options.md.
///
/// Designated initializers must name the fields in the order they are
/// declared here (GCC refuses any other order, Clang warns):
/// `expiry`, `tries`, `retry_delay`, `drift_factor`, `timeout_factor`,
/// `value_generator`, `value`, `fail_fast`, `shuffle_nodes`,
/// `set_nx_on_extend`, `durable_replicas`, `durable_wait_timeout`,
/// `auto_extend`, `auto_extend_interval`, `max_hold`, `max_extensions`,
/// `on_lost`, `reentrant`.
///
/// \code
/// auto m = rs.new_mutex("orders:42", {.expiry = 10s, .tries = 5, .retry_delay = 100ms});
/// \endcode
struct mutex_options {
  /// Lock lifetime on each node (the PX of SET). Default 8 s. Must exceed
  /// drift + per-node command timeout.
  std::chrono::milliseconds expiry = std::chrono::seconds{8};
  /// Acquisition tries made by `lock`, >= 1. Default 32 (with the default
  /// delay, about 5 s in all; then `lock()` throws `lock_error`).
  /// `redsync::unlimited_tries`: `lock` waits until it acquires, or its
  /// context ends it. `try_lock` makes 1.
  int tries = 32;
  /// Delay before try `try_number + 1` (try_number counts from 1): a
  /// duration (`100ms`, the same before every try, in [0, 24 h]) or a
  /// callable `int try_number -> std::chrono::milliseconds`
  /// (`retry_delay_option`, retries.hpp). Default: uniformly random in
  /// [50 ms, 250 ms).
  retry_delay_option retry_delay{};
  /// Clock drift allowance: drift = expiry * drift_factor + 2 ms. In [0, 1).
  /// Default 0.01.
  double drift_factor = 0.01;
  /// Per-node command timeout = expiry * timeout_factor. In (0, 1).
  /// Default 0.05 (400 ms with the default expiry).
  double timeout_factor = 0.05;
  /// Makes each acquisition's value. Default (empty): 16 bytes from the OS
  /// CSPRNG, base64-encoded (24 characters). Must return non-empty strings.
  std::function<std::string()> value_generator{};
  /// A fixed value instead of a generated one (redsync's WithValue). Neither
  /// it nor a generated value may be empty or start with a NUL byte (that
  /// marks a key a release reserved for the next waiter).
  std::optional<std::string> value{};
  /// Return from an attempt as soon as a quorum is reached or has become
  /// impossible, instead of waiting for every node. Default false.
  bool fail_fast = false;
  /// Contact the nodes in a random order on each attempt. Default false.
  bool shuffle_nodes = false;
  /// `extend` re-creates the key with SET NX where it is missing.
  /// Default false.
  bool set_nx_on_extend = false;

  // -- durable mode (docs/cluster.md, "Durable mode") -------------------------

  /// Durable mode: after the acquisition's script on each member (on a
  /// cluster member, on the master of each slot group of the names), send
  /// `WAIT durable_replicas durable_wait_timeout` on the same connection,
  /// and count that member's vote only if at least this many replicas
  /// acknowledged the write; otherwise the member answers
  /// `node_status::reply_error` with a message such as "durable: 0 of 1
  /// replicas acknowledged within 50 ms", and a failed attempt undoes it
  /// like any non-vote. Applies to standalone members (a master with
  /// replicas under Sentinel loses the same writes in a failover) and to
  /// cluster members alike; a member with fewer replicas never votes. The
  /// first attempt's MULTI transaction is not used in this mode (every
  /// attempt runs the script). Default 0 = off. 0..1000.
  ///
  /// Not applied to extensions, on purpose: an extension lost in a failover
  /// leaves the promoted replica with the key's older expiry, but a promoted
  /// replica is a restarted node (the restart guard, on by default): it
  /// votes for nobody until a window of at least the longest expiry has
  /// passed since the failover was noticed, which is after the lost
  /// extension, so the holder's validity (at most one expiry from the
  /// extension) ends first. With `restart_guard` off that argument fails,
  /// and a lost extension (never waited for) can let the promoted replica
  /// grant the name early: durable mode does not make turning the guard off
  /// safe, and does not replace it. Mutexes only (semaphores have no
  /// durable mode).
  int durable_replicas = 0;
  /// The timeout of each `WAIT`, > 0. Default 0 = half the per-node command
  /// timeout (expiry * timeout_factor / 2, at least 1 ms). Must be less than
  /// the per-node command timeout: the script and the WAIT together are
  /// bounded by it, so a WAIT never outlives the round, and the validity
  /// subtracts the time the WAIT took. Only with `durable_replicas` > 0. A
  /// WAIT blocks its connection while it waits (commands of other names
  /// routed to it queue behind; a larger `pool_size` helps), so keep it
  /// short. Redis checks a WAIT's timeout at its `hz` (every 100 ms by
  /// default), so a WAIT may answer that much late; past the per-node
  /// timeout the member is a non-vote ("durable: WAIT ... got no answer").
  std::chrono::milliseconds durable_wait_timeout = std::chrono::milliseconds{0};

  // -- holding safely --------------------------------------------------------

  /// Extend automatically on the loop while the lock is held (a watchdog).
  /// Default false. If an extension misses its quorum it is retried while the
  /// local validity leaves room for one; if none can land before `until()`,
  /// the lock is lost: `on_lost` runs once and `Mutex::lost()` turns true.
  bool auto_extend = false;
  /// Time between automatic extensions. Default 0 = expiry / 3.
  std::chrono::milliseconds auto_extend_interval = std::chrono::milliseconds{0};
  /// Stop auto-extending once the lock has been held this long since it was
  /// acquired (the lock then expires and is reported lost). Default 0 = no cap.
  std::chrono::milliseconds max_hold = std::chrono::milliseconds{0};
  /// Stop auto-extending after this many extensions. Default 0 = no cap.
  int max_extensions = 0;
  /// Called once per acquisition, on the loop thread, when a held lock is
  /// lost (auto-extension failed, or a cap was reached). Must not block.
  std::function<void(const result&)> on_lost{};

  // -- ownership (docs/api.md, "Reentrancy") ----------------------------------

  /// Reentrant, as `std::recursive_mutex`: the owner is this `Mutex` object
  /// and the thread that acquired it in a blocking call. A blocking
  /// `lock`/`try_lock` on that thread while the lock is held adds a hold:
  /// nothing is sent, and `value()`, `until()` and `token()` stay as they
  /// are; each `unlock` takes one hold, the last one releases. A re-entry
  /// fails with `errc::lost` once the lock was lost, or `errc::expired` once
  /// `until()` has passed; the holds stay owed until the owner's unlocks
  /// pay them, and until then nobody acquires afresh. Asynchronous, future
  /// and Asio calls never re-enter (several tasks share a thread). Another
  /// thread's `lock` on this `Mutex` reports `errc::already_held` while the
  /// owner holds it, and another `Mutex` of the same name contends as usual.
  /// Default false: a `lock` on a held mutex reports `errc::already_held`.
  bool reentrant = false;
};

}  // namespace redsync
