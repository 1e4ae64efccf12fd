// Test harness: a local Redis Cluster of real redis-server processes.
//
// `masters` masters share the 16384 slots in equal ranges; each may have
// `replicas` replicas. The cluster is built directly (CLUSTER
// SET-CONFIG-EPOCH, ADDSLOTSRANGE, MEET, REPLICATE: what `redis-cli
// --cluster create` does, without its one-second sleeps), and the
// constructor returns once every node reports cluster_state:ok, agrees on
// who serves every slot, and every replica's link to its master is up.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace redsync::test {

/// How to start a redis_cluster. All fields are optional.
struct cluster_config {
  /// Masters; each serves an equal range of slots. Default 3.
  std::size_t masters = 3;
  /// Replicas per master. Default 0.
  std::size_t replicas = 0;
  /// cluster-node-timeout in ms: how long until a silent node is marked
  /// failed (and a replica of a failed master is promoted). Default 1000.
  int node_timeout_ms = 1000;
  /// For every server (extra_args are appended after the cluster's own).
  config server{};
};

/// One local Redis Cluster. Non-copyable, non-movable. Nodes 0..masters-1
/// are the masters (node k serves the k-th range of slots); then the
/// replicas, master by master. Throws std::runtime_error (with the log of
/// the node that failed) when the cluster does not form within 20 s.
class redis_cluster {
 public:
  explicit redis_cluster(cluster_config cfg = {});
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  std::size_t size() const { return servers_.size(); }
  redis_server& operator[](std::size_t i) { return *servers_.at(i); }
  const redis_server& operator[](std::size_t i) const { return *servers_.at(i); }

  /// "redis+cluster://127.0.0.1:P0,127.0.0.1:P1,..." over every node.
  std::string uri() const;
  /// The node's cluster id (CLUSTER MYID, read at startup).
  const std::string& id(std::size_t i) const { return ids_.at(i); }
  /// The node that serves `slot` as master, as node `asked` sees it now
  /// (CLUSTER SLOTS).
  std::size_t owner(std::uint16_t slot, std::size_t asked = 0) const;

  /// Waits until every running node reports cluster_state:ok and, unless
  /// the node is down, the same owner for every slot; false after `bound`.
  bool wait_ok(std::chrono::milliseconds bound) const;

  /// What each node says now, for a failure message: whether it is paused,
  /// its role and replication link, who it says serves `slot`, and its
  /// CLUSTER NODES view (epochs and flags of every node). Never throws; a
  /// node that does not answer says so.
  std::string describe(std::uint16_t slot) const;

  /// The live resharding of one slot, in the steps Redis documents:
  /// `to` IMPORTING from `from`, `from` MIGRATING to `to` ...
  void begin_migration(std::uint16_t slot, std::size_t from, std::size_t to);
  /// ... MIGRATE every key of the slot from `from` to `to` (the keys named,
  /// or all of them when `keys` is empty) ...
  void migrate_keys(std::uint16_t slot, std::size_t from, std::size_t to,
                    const std::vector<std::string>& keys = {});
  /// ... CLUSTER SETSLOT slot NODE to, on every master.
  void finish_migration(std::uint16_t slot, std::size_t to);

 private:
  void form(const cluster_config& cfg);

  std::vector<std::unique_ptr<redis_server>> servers_;
  std::vector<std::string> ids_;
  std::vector<int> bus_ports_;
};

}  // namespace redsync::test
