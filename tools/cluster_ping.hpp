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
};

/// Pings the cluster member `uri`: discovery, then every master at once.
cluster_ping ping_cluster(const std::string& uri, std::chrono::milliseconds timeout);

/// The member's lines for `ping`'s text: the member, then one per master.
std::string cluster_ping_text(const cluster_ping& p);

/// The member's entry in `ping --json`'s "nodes", with its "masters".
std::string cluster_ping_json(const cluster_ping& p);

}  // namespace redsync::cli
