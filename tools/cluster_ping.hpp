// `redsync ping` for a cluster member: its slot map, a PING to every master
// the map names, and whether every slot has a master that answered (the
// member is up only then: a lock name of a slot whose master is down gets
// no vote from it).
#pragma once

#include "cluster_map.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace redsync::cli {

struct cluster_ping {
  cluster_view view{};
  std::vector<probe_result> masters{};  ///< per master of view.map
  std::vector<bool> master_up{};        ///< answered PING
  slot_ranges unserved{};               ///< slots without a master that answered
  bool up = false;                      ///< a map was read and every slot is served
  /// A seed or master refused the credentials (it answered: counted up, as
  /// a standalone node that does), or TLS in a way no retry fixes.
  bool auth_refused = false;
  bool tls_refused = false;
  std::string error{};  ///< why not up
  /// Why the member never votes (the same cluster as an earlier member:
  /// same_clusters), else empty.
  std::string never{};
};

/// Pings the cluster member `uri`: discovery, then every master at once.
cluster_ping ping_cluster(const std::string& uri, std::chrono::milliseconds timeout);

/// One cluster listed as two members (seeds that reach the same cluster):
/// per entry of `pings`, why it never votes when a master of its map has the
/// node id of a master of an earlier entry's map (or, where the map gives no
/// ids, the address), else empty. `numbers[k]`: the 1-based position of
/// pings[k] in the node list. The library counts such a cluster once, under
/// its first name (lib/redlock/trust/node_trust.hpp, by the masters' run_ids).
std::vector<std::string> same_clusters(const std::vector<cluster_ping>& pings,
                                       const std::vector<std::size_t>& numbers);

/// The member's lines for `ping`'s text: the member, then one per master.
std::string cluster_ping_text(const cluster_ping& p);

/// The member's entry in `ping --json`'s "nodes", with its "masters".
std::string cluster_ping_json(const cluster_ping& p);

}  // namespace redsync::cli
