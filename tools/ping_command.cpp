// `redsync ping`: is every node up, and how fast does it answer.

#include "args.hpp"
#include "commands.hpp"
#include "exit_status.hpp"
#include "help.hpp"
#include "node_probe.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>

namespace redsync::cli {
namespace {

constexpr std::array<option_spec, 3> ping_options{{
    {"nodes", 0, true},
    {"timeout", 0, true},
    {"help", 'h', false},
}};

}  // namespace

int run_ping(std::span<char* const> argv) {
  const parsed_args args = parse_args(argv, ping_options);
  if (args.has("help")) {
    std::fwrite(ping_help.data(), 1, ping_help.size(), stdout);
    return exit_status::ok;
  }
  if (args.has_separator) throw usage_error("ping: unexpected \"--\"");
  if (!args.positionals.empty()) {
    throw usage_error(fmt::format("ping: unexpected argument \"{}\"", args.positionals[0]));
  }
  const std::vector<std::string> uris = resolve_nodes(args);
  std::chrono::milliseconds timeout{1000};
  if (const std::string* t = args.last("timeout")) {
    timeout = parse_duration("--timeout", *t);
    if (timeout.count() == 0) throw usage_error("--timeout: must be greater than 0");
  }

  const auto results = probe_all(uris, {{"PING"}}, timeout);
  std::size_t up = 0;
  for (const auto& r : results) {
    const bool pong = r.up && r.replies.at(0).type == probe_reply::kind::status;
    if (pong) {
      ++up;
      fmt::print("{}: up, {} us\n", r.address, r.round_trip.count());
    } else if (r.up) {
      fmt::print("{}: down ({})\n", r.address, r.replies.at(0).str);
    } else {
      fmt::print("{}: down ({})\n", r.address, r.error);
    }
  }
  const std::size_t n = results.size();
  const std::size_t quorum = n / 2 + 1;
  fmt::print("{}/{} nodes up, quorum {}\n", up, n, quorum);
  std::fflush(stdout);
  if (up == n) return exit_status::ok;
  return up >= quorum ? exit_status::degraded : exit_status::unavailable;
}

}  // namespace redsync::cli
