// Shared by the examples: where the Redis masters are.
//
// Node URIs come from the command line (argv[1..]), else from the environment
// variable REDSYNC_NODES (comma-separated), else the five nodes that
// `scripts/testbed up` starts on redis://127.0.0.1:7001..7005.
#pragma once

#include <redsync/error.hpp>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace examples {

inline std::vector<std::string> node_uris(int argc, char** argv) {
  std::vector<std::string> uris(argv + 1, argv + argc);
  if (!uris.empty()) return uris;
  if (const char* env = std::getenv("REDSYNC_NODES"); env != nullptr && *env != '\0') {
    std::string_view rest = env;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      if (auto uri = rest.substr(0, comma); !uri.empty()) uris.emplace_back(uri);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    if (!uris.empty()) return uris;
  }
  for (int port = 7001; port <= 7005; ++port) uris.push_back("redis://127.0.0.1:" + std::to_string(port));
  return uris;
}

// True when some node could not be reached during the last attempt of `r`.
inline bool nodes_unreachable(const redsync::result& r) {
  return !r.nodes_with(redsync::node_status::unreachable).empty();
}

// What to tell the user when a lock could not be had because nodes are down.
inline constexpr std::string_view unreachable_hint =
    "are the Redis nodes running? Start the local testbed with `scripts/testbed up`, "
    "or pass node URIs as arguments or in REDSYNC_NODES";

}  // namespace examples
