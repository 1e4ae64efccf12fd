#pragma once

// Who a node is, from its reply to INFO: the identity the restart guard and
// the counter's repair compare with the node's record (node_trust.hpp), or
// why the node can never vote. Pure.
//
// The identity changes whenever the node's data may have been replaced or
// rolled back while its address stayed: a restart (run_id), a full
// resynchronisation from another server (master_replid), and a load of an
// RDB file in place (`DEBUG RELOAD`, which keeps both): INFO persistence's
// `rdb_last_load_keys_loaded` and `rdb_last_load_keys_expired` (Redis 7.0
// and later) are zero until the server run first loads a file, and are set
// by every load. So the first load of a server run always changes the
// identity; a later load changes it only when it loaded or expired a
// different number of keys than the load before (README, Safety: limits of
// the identity check).

#include "transport/reply.hpp"

#include <redsync/options.hpp>

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace redsync::detail {

// A server's version, from INFO's `redis_version` ("7.0.15"; Valkey gives
// its Redis-compatible version there too).
struct server_version {
  int major = 0;
  int minor = 0;
  int patch = 0;
  friend auto operator<=>(const server_version&, const server_version&) = default;
};
// INFO text's `redis_version`, or nullopt when absent or not "N.N[.N...]". Pure.
std::optional<server_version> redis_version(std::string_view info);

// The least Redis version each script_mode needs: eval 5.0 (the scripts read
// TIME before they write, which needs effects replication, the default from
// 5.0 on), functions 7.0 (Redis Functions).
server_version minimum_version(script_mode mode) noexcept;

// How the node list names the server whose INFO is read: as a standalone
// node (redis://, rediss://, unix:), or as a master found through a cluster
// member (redis+cluster://), whose INFO the router asks without the cluster
// section.
enum class listed_as { standalone, cluster_master };

// What a node's reply to INFO says about it: its identity (run_id, then
// master_replid when given, then the last RDB load's key counts when the
// server run has loaded a file), or why its vote can never count (INFO
// refused, a Redis version below `mode`'s minimum, no run_id, a replica, a
// maxmemory policy that evicts, a Redis Cluster node listed as a standalone
// node). Pure.
struct server_identity {
  std::string identity;  // empty when `problem` is set
  std::string problem;
  // The server process: two nodes with the same run_id are one server under
  // two names (node_trust.hpp). Not master_replid, which a replica and its
  // master share, nor the load counts. Empty when `problem` is set.
  std::string run_id;
};
server_identity identify_server(const reply& info, script_mode mode = script_mode::eval,
                                listed_as as = listed_as::standalone);

// When the INFO text `info` says cluster_enabled:1 of a node listed as a
// standalone node: why it never votes, naming it as node `number` (1-based)
// with URI `uri` (engine::uri's form, without credentials) and the
// redis+cluster:// URI to list instead; the same without the node's names
// when `uri` is empty. Else empty. A cluster node answers CROSSSLOT to every
// call of the standalone layout (a name and redsync:node are in different
// slots), and a name whose keys happen to share a slot would vote from
// that one master: either way the set loses a vote it seems to have. Pure.
std::string cluster_node_problem(std::string_view info, std::size_t number = 0, std::string_view uri = {});

// The value of `key` in INFO text ("key:value" lines), or empty. Pure.
std::string_view info_field(std::string_view info, std::string_view key);

}  // namespace redsync::detail
