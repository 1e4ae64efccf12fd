// Probes every member of the set about one lock name, each in its own key
// layout (docs/cluster.md): a standalone node as `NAME` and `redsync:node`,
// a cluster member as `{NAME}` and `redsync:node:{T}` on the master that
// serves the name's slot (cluster_map.hpp's probe_slot).
#pragma once

#include "node_probe.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace redsync::cli {

/// The keys of a lock name on one member.
struct name_keys {
  std::string lock;    ///< the lock key; its line and leases add suffixes
  std::string record;  ///< the node record that holds its fencing counter
};

using commands_for_keys = std::function<std::vector<std::vector<std::string>>(const name_keys&)>;

/// Runs commands_for(keys of `name` on member i) on every member of `uris`
/// at once. Results in member order; a cluster member's address names it and
/// the master that answered.
std::vector<probe_result> probe_name(const std::vector<std::string>& uris, const std::string& name,
                                     const commands_for_keys& commands_for,
                                     std::chrono::milliseconds timeout);

}  // namespace redsync::cli
