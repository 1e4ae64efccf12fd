#pragma once

// Cluster member URIs: one member of the Redlock set that is a whole Redis
// Cluster, named by seed nodes (docs/cluster.md):
//   redis+cluster://[user[:password]@]host[:port][,host[:port]...][/0]
//   rediss+cluster://[user[:password]@]host[:port][,...][?ca=...&cert=...]
// Each seed is parsed exactly as the standalone URI it would be alone (the
// credentials, the db path and the TLS parameters are shared by every
// seed), so the two forms accept the same parts and report the same
// errors. A cluster has only db 0.

#include <redsync/options.hpp>

#include <string_view>
#include <vector>

namespace redsync::detail {

// True when `uri` starts with redis+cluster:// or rediss+cluster:// (any case).
bool is_cluster_uri(std::string_view uri) noexcept;

// The seeds of a cluster member URI, in the order given, without repeats.
// Throws config_error naming the URI (passwords shown as "***") and, for a
// bad seed, which one.
std::vector<node_options> parse_cluster_uri(std::string_view uri);

}  // namespace redsync::detail
