// `redsync status NAME`: what every node holds for a lock name.

#include "args.hpp"
#include "commands.hpp"
#include "exit_status.hpp"
#include "help.hpp"
#include "node_probe.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace redsync::cli {
namespace {

constexpr std::array<option_spec, 4> status_options{{
    {"nodes", 0, true},
    {"value", 0, true},
    {"timeout", 0, true},
    {"help", 'h', false},
}};

}  // namespace

int run_status(std::span<char* const> argv) {
  const parsed_args args = parse_args(argv, status_options);
  if (args.has("help")) {
    std::fwrite(status_help.data(), 1, status_help.size(), stdout);
    return exit_status::ok;
  }
  if (args.has_separator) throw usage_error("status: unexpected \"--\"");
  if (args.positionals.empty()) throw usage_error("status: missing lock NAME");
  if (args.positionals.size() > 1) {
    throw usage_error(fmt::format("status: unexpected argument \"{}\"", args.positionals[1]));
  }
  const std::string& name = args.positionals[0];
  const std::vector<std::string> uris = resolve_nodes(args);
  std::chrono::milliseconds timeout{1000};
  if (const std::string* t = args.last("timeout")) {
    timeout = parse_duration("--timeout", *t);
    if (timeout.count() == 0) throw usage_error("--timeout: must be greater than 0");
  }
  std::optional<std::string> ours;
  if (const std::string* v = args.last("value")) {
    ours = *v;
  } else if (const char* env = std::getenv("REDSYNC_LOCK_VALUE"); env != nullptr && *env != '\0') {
    ours = env;
  }

  const auto results = probe_all(uris, {{"GET", name}, {"PTTL", name}}, timeout);
  std::size_t answered = 0;
  std::size_t held = 0;
  std::size_t held_by_us = 0;
  for (const auto& r : results) {
    if (!r.up) {
      fmt::print("{}: down ({})\n", r.address, r.error);
      continue;
    }
    ++answered;
    const probe_reply& value = r.replies.at(0);
    const probe_reply& pttl = r.replies.at(1);
    if (value.type == probe_reply::kind::error) {
      fmt::print("{}: error ({})\n", r.address, value.str);
    } else if (value.type != probe_reply::kind::string) {
      fmt::print("{}: absent\n", r.address);
    } else {
      ++held;
      std::string line = fmt::format("{}: held, pttl ", r.address);
      line += pttl.type == probe_reply::kind::integer && pttl.integer >= 0
                  ? fmt::format("{} ms", pttl.integer)
                  : std::string("none");
      line += fmt::format(", value \"{}\"", value.str);
      if (ours) {
        const bool mine = value.str == *ours;
        held_by_us += mine ? 1 : 0;
        line += mine ? ", ours" : ", not ours";
      }
      fmt::print("{}\n", line);
    }
  }
  const std::size_t n = results.size();
  const std::size_t quorum = n / 2 + 1;
  std::string summary = fmt::format("lock \"{}\": held on {}/{} nodes", name, held, n);
  if (ours) summary += fmt::format(", ours on {}/{}", held_by_us, n);
  summary += fmt::format("; {}/{} nodes answered, quorum {}", answered, n, quorum);
  fmt::print("{}\n", summary);
  std::fflush(stdout);
  return answered >= quorum ? exit_status::ok : exit_status::unavailable;
}

}  // namespace redsync::cli
