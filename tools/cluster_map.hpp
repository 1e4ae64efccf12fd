// A cluster member (redis+cluster://seed,seed...) as `ping` and `status`
// see it: its slot map, read from the first seed that answers with the
// library's own parser (lib/transport/slot_map.hpp, compiled into the tool
// as tls_session.cpp is), and blocking probes of its masters with the
// seeds' credentials and TLS parameters. Every call is bounded by the
// probes' timeouts.
#pragma once

#include "node_probe.hpp"

#include "transport/slot_map.hpp"

#include <redsync/options.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redsync::cli {

using slot_ranges = std::vector<std::pair<std::uint16_t, std::uint16_t>>;

struct cluster_view {
  /// "redis+cluster://host:port,host:port": the seeds, without credentials.
  std::string label;
  member_options member;
  /// The map, from the first seed (in the order given) that answered.
  std::optional<detail::slot_map> map;
  /// When !map: what every seed answered, for people.
  std::string error;
  /// When !map: a seed refused the credentials (AUTH, NOAUTH), or TLS in a
  /// way no retry fixes; as probe_result's fields.
  bool refused = false;
  bool tls_refused = false;

  /// How to reach master `i` of the map: the first seed's credentials and
  /// TLS parameters at the master's address.
  node_options master(std::size_t i) const;
};

/// Reads the slot map of the cluster member `uri` (CLUSTER SHARDS, or
/// CLUSTER SLOTS where SHARDS is unknown), asking every seed at once.
cluster_view discover_cluster(const std::string& uri, std::chrono::milliseconds timeout);

/// The slots no entry of `up` (per master of `map`) serves: those whose
/// master is down, and those no master serves at all.
slot_ranges unserved_slots(const detail::slot_map& map, const std::vector<bool>& up);

/// "0-5460, 10923" for people; "[[0,5460],[10923,10923]]" for JSON.
std::string ranges_text(const slot_ranges& ranges);
std::string ranges_json(const slot_ranges& ranges);

/// Runs `commands` on the master that serves `slot`, following one MOVED or
/// ASK (a map read moments ago may already be stale: a migration). The
/// result's address names the member and the master that answered. Not up,
/// with the reason, when no master serves the slot.
probe_result probe_slot(const cluster_view& view, std::uint16_t slot,
                        const std::vector<std::vector<std::string>>& commands,
                        std::chrono::milliseconds timeout);

}  // namespace redsync::cli
