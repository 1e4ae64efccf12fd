// Shared by the examples: where the Redis masters are, and `--help`.
//
// Node URIs come from the command line (argv[1..]), else from the environment
// variable REDSYNC_NODES (comma-separated, split by redsync::members_from_env,
// so `redis+cluster://a:1,b:2` is one member; `eval "$(scripts/testbed env)"`
// sets it), else the testbed's nodes on 127.0.0.1, ports
// REDSYNC_TESTBED_PORT (default 7001) onwards, REDSYNC_TESTBED_NODES of them
// (default 5): the nodes `scripts/testbed up` starts with the same variables.
#pragma once

#include <redsync/error.hpp>
#include <redsync/members.hpp>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace examples {

// What every example's --help says about its node arguments.
inline constexpr std::string_view nodes_help =
    "Nodes: the URIs given as arguments, else $REDSYNC_NODES (comma-separated; a\n"
    "piece without a scheme is one more seed of the redis+cluster:// URI before it;\n"
    "`eval \"$(scripts/testbed env)\"` sets it), else redis://127.0.0.1:PORT for the\n"
    "$REDSYNC_TESTBED_NODES (default 5) ports from $REDSYNC_TESTBED_PORT (default\n"
    "7001) on: the nodes `scripts/testbed up` starts.\n";

// True when `arg` asks for help.
inline bool is_help(std::string_view arg) {
  return arg == "--help" || arg == "-h";
}

// Prints `usage` and nodes_help on stdout.
inline void print_usage(std::string_view usage) {
  std::fwrite(usage.data(), 1, usage.size(), stdout);
  std::fwrite("\n", 1, 1, stdout);
  std::fwrite(nodes_help.data(), 1, nodes_help.size(), stdout);
}

// A whole number in [min, max] from environment variable `name`, else
// `fallback`; anything else is an error that names the variable.
inline int env_number(const char* name, int fallback, int min, int max) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < min || v > max) {
    throw std::invalid_argument(std::string(name) + " must be a number in " + std::to_string(min) + ".." +
                                std::to_string(max) + ", got \"" + text + "\"");
  }
  return static_cast<int>(v);
}

// The testbed's nodes, as `scripts/testbed up` starts them.
inline std::vector<std::string> testbed_uris() {
  const int first = env_number("REDSYNC_TESTBED_PORT", 7001, 1, 65535);
  const int count = env_number("REDSYNC_TESTBED_NODES", 5, 1, 65535 - first + 1);
  std::vector<std::string> uris;
  for (int port = first; port < first + count; ++port)
    uris.push_back("redis://127.0.0.1:" + std::to_string(port));
  return uris;
}

// The node URIs: argv[1..] if any, else REDSYNC_NODES, else testbed_uris().
// `--help` (or -h) prints `usage` and exits 0; another argument that starts
// with '-' is an error (exit 2).
inline std::vector<std::string> node_uris(int argc, char** argv, std::string_view usage) {
  std::vector<std::string> uris;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (is_help(arg)) {
      print_usage(usage);
      std::exit(0);
    }
    if (arg.starts_with("-")) {
      std::fprintf(stderr, "unknown option %s (see --help)\n", argv[i]);
      std::exit(2);
    }
    uris.emplace_back(arg);
  }
  if (!uris.empty()) return uris;
  // The library splits the list (a cluster member's seeds are separated by
  // commas too) and throws a config_error naming a bad URI by its place.
  if (const char* env = std::getenv("REDSYNC_NODES"); env != nullptr && *env != '\0')
    return redsync::members_from_env("REDSYNC_NODES");
  return testbed_uris();
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
