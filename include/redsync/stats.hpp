#pragma once

/// \file
/// Counters of a `Redsync`, readable from any thread without callbacks
/// (`Redsync::stats()`), and their Prometheus text exposition.
///
/// Every counter counts from the `Redsync`'s construction and only grows
/// (except the two node states). A snapshot is read counter by counter with
/// relaxed atomic loads, without locks and without the loop thread: it is
/// cheap, callable anywhere (an observer callback too), and each counter is
/// exact, but two counters read while calls finish may be one event apart.

#include <redsync/error.hpp>
#include <redsync/export.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redsync {

/// Node command latencies in fixed log-scale buckets (1-2.5-5 per decade,
/// 50 µs to 5 s).
struct REDSYNC_API latency_histogram {
  /// Number of finite buckets.
  static constexpr std::size_t finite_buckets = 16;
  /// Bucket upper bounds, inclusive, in microseconds.
  static constexpr std::array<std::int64_t, finite_buckets> upper_bounds_us = {
      50,     100,    250,     500,     1'000,   2'500,     5'000,     10'000,
      25'000, 50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000};
  /// `counts[i]`: latencies in (`upper_bounds_us[i-1]`, `upper_bounds_us[i]`];
  /// the last element counts those above 5 s. Not cumulative.
  std::array<std::uint64_t, finite_buckets + 1> counts{};
  /// Sum of all recorded latencies.
  std::chrono::microseconds sum{0};

  /// Number of recorded latencies (the sum of `counts`).
  std::uint64_t count() const noexcept;
  /// Index of the bucket that counts `latency`.
  static std::size_t bucket_of(std::chrono::microseconds latency) noexcept;
};

/// Counters of one call kind (acquisitions, releases or extensions).
struct REDSYNC_API call_counts {
  /// Calls that succeeded.
  std::uint64_t ok = 0;
  /// Calls that failed, indexed by `errc` value (index 0 is unused).
  std::array<std::uint64_t, 16> failed{};

  /// Failures with error `e`.
  std::uint64_t failures(errc e) const noexcept;
  /// All failures.
  std::uint64_t total_failures() const noexcept;
};

/// Counters of one shard of a cluster member: one master, named by its
/// address, as the member's counters below are for the whole member
/// (docs/observability.md, "Cluster members").
struct REDSYNC_API shard_stats {
  /// The master's address (`host:port`, as the slot map names it).
  std::string address;
  /// A connection to this master is up.
  bool connected = false;
  /// Its last yes to an acquisition did not count (the restart guard of a
  /// slot it serves, e.g. after a failover made it master).
  bool excluded = false;
  /// Times a connection to it came up again after an outage or a drop.
  std::uint64_t reconnects = 0;
  /// Outages: times it became unreachable.
  std::uint64_t unreachable = 0;
  /// The member's answers this master gave, indexed by `node_status` value
  /// (as `node_stats::answers`; a call that never reached a master, e.g. no
  /// slot map, is counted for the member only).
  std::array<std::uint64_t, 8> answers{};
  /// Latency of those answers, except `unreachable` ones.
  latency_histogram latency;

  /// Answers with status `s`.
  std::uint64_t answers_with(node_status s) const noexcept;
  /// Answers that were errors: `reply_error`, `timeout` and `unreachable`.
  std::uint64_t errors() const noexcept;
};

/// What the router of a cluster member did: it reads the slot map and
/// follows redirections (docs/cluster.md, "Routing").
struct cluster_router_stats {
  /// Slot map reads that gave a map (the first, after a MOVED, after a
  /// master did not answer).
  std::uint64_t map_reads = 0;
  /// Slot map reads that got no map from any node.
  std::uint64_t map_read_failures = 0;
  /// `MOVED` redirections followed (the slot had a new owner).
  std::uint64_t moved = 0;
  /// `ASK` redirections followed (the slot was migrating).
  std::uint64_t ask = 0;
  /// `TRYAGAIN` answers handed up as a non-vote (a multi-key call during a
  /// slot's migration).
  std::uint64_t tryagain = 0;
  /// `CLUSTERDOWN` answers handed up as a non-vote, and calls for a slot
  /// that no master serves.
  std::uint64_t clusterdown = 0;
  /// Failovers seen in the map: a shard's slots served by a master that was
  /// none before, in place of one that is no master any more.
  std::uint64_t failovers = 0;
  /// Masters that serve slots in the last map read (0 before the first).
  std::size_t masters = 0;
};

/// Counters of one node.
struct REDSYNC_API node_stats {
  /// The node's address (`host:port` or `unix:/path`).
  std::string address;
  /// A connection to it is up (false before the first connect and while it
  /// is unreachable).
  bool connected = false;
  /// Its last yes to an acquisition did not count (`node_state::excluded`).
  bool excluded = false;
  /// Times a connection came up again after an outage or a drop.
  std::uint64_t reconnects = 0;
  /// Outages: times the node became unreachable.
  std::uint64_t unreachable = 0;
  /// Answers in the rounds of lock calls, indexed by `node_status` value:
  /// `ok`, `taken`, `missing`, `reply_error`, `timeout`, `unreachable`, and
  /// `excluded` for a yes that did not count. A node left out of a round, or
  /// whose answer came after the round had reported, is not counted.
  std::array<std::uint64_t, 8> answers{};
  /// Scripts this `Redsync` loaded on the node (EVAL after NOSCRIPT, or
  /// FUNCTION LOAD): the first use of each script, and every reload.
  std::uint64_t script_loads = 0;
  /// Of those, reloads: the node lost a script it had been given (SCRIPT
  /// FLUSH, FUNCTION FLUSH, restart, failover).
  std::uint64_t script_reloads = 0;
  /// Latency of its answers counted in `answers`, except `unreachable` ones
  /// (failed at once while the node is down: no round trip to measure).
  latency_histogram latency;
  /// True for a member that is a whole Redis Cluster (`redis+cluster://`);
  /// `address` is then "cluster " and its seeds, and `connected` is true
  /// while a connection to one of its masters is up.
  bool cluster = false;
  /// A cluster member's masters, as its last slot map read named them, in
  /// the order they were first seen (empty for a standalone node). A master
  /// that left the map is left out; at most `max_shards` are ever tracked
  /// per member (later ones count for the member only).
  std::vector<shard_stats> shards;
  /// A cluster member's router counters (zero for a standalone node).
  cluster_router_stats router;
  /// Addresses (masters, and seeds read for the map) tracked per cluster
  /// member, at most.
  static constexpr std::size_t max_shards = 128;

  /// Answers with status `s`.
  std::uint64_t answers_with(node_status s) const noexcept;
  /// Answers that were errors: `reply_error`, `timeout` and `unreachable`.
  std::uint64_t errors() const noexcept;
};

/// What `Redsync::stats()` returns.
struct stats_snapshot {
  /// Acquisitions (`lock`, `try_lock`, async forms), by outcome.
  call_counts acquisitions;
  /// Unlocks, by outcome.
  call_counts releases;
  /// Extensions by `extend` and automatic ones, by outcome.
  call_counts extensions;
  /// Held locks lost under auto-extension.
  std::uint64_t lost_locks = 0;
  /// Permit acquisitions (`Semaphore::acquire`, `try_acquire`, async
  /// forms), by outcome. Not counted in `acquisitions`.
  call_counts permit_acquisitions;
  /// Permit releases, by outcome.
  call_counts permit_releases;
  /// Permit extensions by `permit::extend` and automatic ones, by outcome.
  call_counts permit_extensions;
  /// Held permits lost under auto-extension.
  std::uint64_t lost_permits = 0;
  /// Exceptions thrown by observer callbacks or the log hook (caught).
  std::uint64_t observer_errors = 0;
  /// One entry per node, in node order.
  std::vector<node_stats> nodes;
};

/// The snapshot in the Prometheus text exposition format (version 0.0.4),
/// every metric name starting with `prefix` + "_" (default "redsync"):
/// `_acquisitions_total`, `_releases_total`, `_extensions_total` (label
/// `result`: "ok" or the `errc` name), `_lost_locks_total`, the same for
/// permits (`_permit_acquisitions_total`, `_permit_releases_total`,
/// `_permit_extensions_total`, `_lost_permits_total`),
/// `_observer_errors_total`, and per node (label `node`, the address)
/// `_node_connected`, `_node_excluded`, `_node_reconnects_total`,
/// `_node_unreachable_total`, `_node_answers_total` (label `status`),
/// `_node_script_loads_total`, `_node_script_reloads_total` and the histogram
/// `_node_latency_seconds`. With a cluster member in the set, also per
/// shard (labels `node` and `shard`, the master's address) `_shard_connected`,
/// `_shard_excluded`, `_shard_reconnects_total`, `_shard_unreachable_total`,
/// `_shard_answers_total` (label `status`) and the histogram
/// `_shard_latency_seconds`, and per cluster member `_cluster_map_reads_total`
/// (label `result`: "ok", "failed"), `_cluster_redirects_total` (label
/// `kind`: "moved", "ask"), `_cluster_errors_total` (label `kind`:
/// "tryagain", "clusterdown"), `_cluster_failovers_total` and the gauge
/// `_cluster_masters`. Label values are escaped as the format requires.
/// `prefix` must be a valid metric name; throws `config_error` otherwise.
REDSYNC_API std::string prometheus_text(const stats_snapshot& s, std::string_view prefix = "redsync");

}  // namespace redsync
