// Probes every member of the set about one lock name, each in its own key
// layout (docs/cluster.md): a standalone node as `NAME` and `redsync:node`,
// a cluster member as `{NAME}` and `redsync:node:{T}` on the master that
// serves the name's slot (cluster_map.hpp's probe_slot).
#pragma once

#include "node_probe.hpp"

#include "transport/slot_map.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace redsync::cli {

/// The keys of a lock name on one member.
struct name_keys {
  std::string lock;      ///< the lock key; its line and leases add suffixes
  std::string record;    ///< the node record that holds its fencing counter
  bool cluster = false;  ///< the cluster layout (a semaphore's keys differ: semaphore_status.hpp)
};

using commands_for_keys = std::function<std::vector<std::vector<std::string>>(const name_keys&)>;

/// Runs commands_for(keys of `name` on member i) on every member of `uris`
/// at once. Results in member order; a cluster member's address names it and
/// the master that answered. With `shards`, also each member's shards for
/// people (member order; empty for a standalone node or a cluster member
/// whose map could not be read): shard_lines'.
std::vector<probe_result> probe_name(const std::vector<std::string>& uris, const std::string& name,
                                     const commands_for_keys& commands_for, std::chrono::milliseconds timeout,
                                     std::vector<std::string>* shards = nullptr);

/// A cluster member's shards, one indented line per master of `map` in the
/// order of its first slot: "  shard HOST:PORT: slots 0-5460", and
/// ", serves slot N" on the master of `slot`.
std::string shard_lines(const detail::slot_map& map, std::uint16_t slot);

}  // namespace redsync::cli
