// What the commands that talk to the nodes (lock, ping, status) read alike
// from their arguments: the node-list options in their option tables, and
// (ping, status) the probes' --timeout and the --ttl votes are judged by.
#pragma once

#include "args.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>

namespace redsync::cli {

/// The options of every command that talks to the nodes: `--nodes` and the
/// TLS options (node_list.hpp: resolve_nodes, apply_tls_options).
inline constexpr std::array<option_spec, 7> node_list_options{{
    {"nodes", 0, true},
    {"tls-ca", 0, true},
    {"tls-ca-dir", 0, true},
    {"tls-cert", 0, true},
    {"tls-key", 0, true},
    {"tls-server-name", 0, true},
    {"tls-insecure", 0, false},
}};

/// A command's option table: node_list_options, then the command's `own`.
template <std::size_t N>
constexpr std::array<option_spec, node_list_options.size() + N> with_node_options(
    const std::array<option_spec, N>& own) {
  std::array<option_spec, node_list_options.size() + N> all{};
  std::copy(node_list_options.begin(), node_list_options.end(), all.begin());
  std::copy(own.begin(), own.end(), all.begin() + node_list_options.size());
  return all;
}

/// --timeout: how long each node's probe may take; default 1s. Throws
/// usage_error for a bad value or 0.
std::chrono::milliseconds probe_timeout(const parsed_args& args);

/// --ttl: the lock TTL a node's vote is judged by, as a `redsync lock --ttl
/// TTL` would see it; default 8s (lock's default). Throws usage_error for a
/// bad value.
std::chrono::milliseconds vote_ttl(const parsed_args& args);

}  // namespace redsync::cli
