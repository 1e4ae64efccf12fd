#pragma once

// Which master of a Redis Cluster serves each slot, read from CLUSTER
// SHARDS (Redis 7) or, where that is unknown, CLUSTER SLOTS; and the
// redirections a cluster answers with (MOVED, ASK). Pure: no I/O.

#include "transport/reply.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

// A master as the cluster names it.
struct cluster_master {
  std::string host;
  int port = 0;
  std::string id;  // node id; empty when CLUSTER SLOTS did not say
  std::vector<std::pair<std::uint16_t, std::uint16_t>> slots;  // ranges it serves, inclusive
  // Its replicas whose health is not "fail" (CLUSTER SHARDS: "online" and
  // "loading") or that are listed (CLUSTER SLOTS); -1 when unknown: a
  // master a MOVED named that the last map read did not list as one. The
  // failover check waits for them (durable_wait.hpp). "loading" counts: a
  // node says that of a replica still in its first synchronisation, and of
  // one whose offset gossip has not brought yet (until the master's first
  // replication PING on an idle shard, 10 s); either may be promoted, and
  // an idle client that kept such a map asked for no WAIT, so a replaced
  // master's yes counted (two holders in the chaos meta-test's tuning). A
  // synchronised replica acknowledges whatever the map says; one still
  // loading keeps its master's votes out until it is (it lacks the writes
  // a vote would rest on). The other "loading", a replica that died in a
  // one-master cluster where nobody can mark it failed, gets no WAIT at
  // all (cluster_router::replicas_of: one shard).
  int replicas = -1;
};

struct slot_map {
  static constexpr std::int32_t no_master = -1;
  std::vector<cluster_master> masters;
  // Per slot: an index into `masters`, or no_master.
  std::array<std::int32_t, 16384> owner{};
  // The shards that serve slots, whatever their master's health (a map read
  // while masters are marked failed still counts them): a cluster of one
  // shard cannot fail over on its own (cluster_router::replicas_of).
  std::size_t shards = 0;

  slot_map() { owner.fill(no_master); }
  // The slots no master serves.
  std::size_t uncovered() const;
  // Index of the master at host:port, adding it (with no slots, replicas
  // unknown) if absent.
  std::size_t master_at(std::string_view host, int port);
};

// Reads a CLUSTER SHARDS reply (RESP2: each shard and node a flat array of
// field, value). `asked_host` stands in for a node whose endpoint is
// unknown ("?" or empty) or for an IP the node does not know (as Redis'
// clients do). `tls`: take each node's tls-port where it has one. Only
// masters whose health is "online" serve their slots. nullopt with `error`
// set when the reply is not a shard list.
std::optional<slot_map> parse_cluster_shards(const reply& r, std::string_view asked_host, bool tls,
                                             std::string& error);
// Reads a CLUSTER SLOTS reply ({first, last, {host, port, id, ...},
// replicas...} per range); as parse_cluster_shards otherwise.
std::optional<slot_map> parse_cluster_slots(const reply& r, std::string_view asked_host, std::string& error);

// A redirection in an error reply: "MOVED 3999 127.0.0.1:6381" or
// "ASK 3999 127.0.0.1:6381".
struct redirect {
  bool ask = false;  // ASK (this command only) rather than MOVED (the slot moved)
  std::uint16_t slot = 0;
  std::string host;  // empty: the host of the node that answered (Redis 7 may say ":6381")
  int port = 0;
};
std::optional<redirect> parse_redirect(std::string_view error);

}  // namespace redsync::detail
