#pragma once

// The node list of a command (--nodes, REDSYNC_NODES, the testbed) and the
// --tls-* options applied to it.

#include "args.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace redsync::cli {

/// redsync::parse_members of `text` (a comma-separated list, where the
/// pieces after a cluster member's URI that do not start a URI of their own
/// are more of its seeds); its config_error becomes a usage_error whose
/// message starts with `what`, the source ("--nodes", "REDSYNC_NODES").
std::vector<std::string> parse_nodes(std::string_view what, std::string_view text);

// True for a redis+cluster:// or rediss+cluster:// URI: a member that is a
// whole Redis Cluster (docs/cluster.md), which the per-node helpers skip.
bool is_cluster_member_uri(std::string_view uri);

/// Adds the TLS options given in `args` (`--tls-ca FILE`, `--tls-ca-dir DIR`,
/// `--tls-cert FILE`, `--tls-key FILE`, `--tls-server-name NAME`,
/// `--tls-insecure`, which every command's option table lists) to every
/// `rediss://` and `rediss+cluster://` URI in `uris`
/// as query parameters (percent-encoded), except those the URI sets itself:
/// the URI's own parameters win. Throws usage_error when a TLS option is
/// given but no node uses rediss://, or a result does not parse.
std::vector<std::string> apply_tls_options(std::vector<std::string> uris, const parsed_args& args);

/// The node list of a command: `--nodes` if given, else $REDSYNC_NODES if set
/// and non-empty, else the testbed's nodes: redis://127.0.0.1:PORT for the
/// $REDSYNC_TESTBED_NODES (default 5) ports from $REDSYNC_TESTBED_PORT
/// (default 7001) on, as scripts/testbed starts them; with
/// the TLS options applied (apply_tls_options).
std::vector<std::string> resolve_nodes(const parsed_args& args);

}  // namespace redsync::cli
