#include "lock_config.hpp"

#include "args.hpp"

#include <fmt/format.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <string_view>

namespace redsync::cli {
namespace {

constexpr std::array<option_spec, 12> lock_options{{
    {"nodes", 0, true},
    {"ttl", 0, true},
    {"wait", 0, true},
    {"tries", 0, true},
    {"retry-delay", 0, true},
    {"drift-factor", 0, true},
    {"fail-fast", 0, false},
    {"no-restart-guard", 0, false},
    {"kill-grace", 0, true},
    {"quiet", 'q', false},
    {"verbose", 'v', false},
    {"help", 'h', false},
}};

}  // namespace

lock_config parse_lock_config(std::span<char* const> argv) {
  const parsed_args args = parse_args(argv, lock_options);
  lock_config cfg;
  if (args.has("help")) {
    cfg.help = true;
    return cfg;
  }
  if (args.positionals.empty()) throw usage_error("lock: missing lock NAME");
  if (!args.has_separator) {
    if (args.positionals.size() > 1) {
      throw usage_error(fmt::format("lock: missing \"--\" before the command \"{}\"", args.positionals[1]));
    }
    throw usage_error("lock: missing \"--\" and the command to run");
  }
  if (args.positionals.size() > 1) {
    throw usage_error(fmt::format("lock: unexpected argument \"{}\" (only one NAME)", args.positionals[1]));
  }
  if (args.after_separator.empty()) throw usage_error("lock: missing command after \"--\"");
  cfg.name = args.positionals[0];
  if (cfg.name.empty()) throw usage_error("lock: empty lock NAME");
  cfg.command = args.after_separator;
  cfg.nodes = resolve_nodes(args);

  if (const std::string* v = args.last("ttl")) {
    cfg.ttl = parse_duration("--ttl", *v);
    if (cfg.ttl.count() == 0) throw usage_error(fmt::format("--ttl: must be greater than 0, got \"{}\"", *v));
  }
  if (const std::string* v = args.last("wait")) cfg.wait = parse_duration("--wait", *v);
  if (const std::string* v = args.last("tries")) cfg.tries = parse_int("--tries", *v, 1, INT_MAX);
  if (const std::string* v = args.last("retry-delay")) cfg.retry_delay = parse_duration("--retry-delay", *v);
  if (const std::string* v = args.last("drift-factor")) {
    cfg.drift_factor = parse_double("--drift-factor", *v);
    if (*cfg.drift_factor >= 1.0) {
      throw usage_error(fmt::format("--drift-factor: must be in [0, 1), got \"{}\"", *v));
    }
  }
  if (const std::string* v = args.last("kill-grace")) cfg.kill_grace = parse_duration("--kill-grace", *v);
  cfg.fail_fast = args.has("fail-fast");
  // The restart guard keeps freshly started nodes out of the quorum; a
  // throw-away test cluster may turn it off (also via the environment, so a
  // test harness can set it once).
  const char* guard_env = std::getenv("REDSYNC_RESTART_GUARD");
  cfg.restart_guard = !args.has("no-restart-guard") && !(guard_env && std::string_view(guard_env) == "0");
  cfg.quiet = args.has("quiet");
  cfg.verbose = args.has("verbose");
  if (cfg.quiet && cfg.verbose) throw usage_error("--quiet and --verbose exclude each other");
  return cfg;
}

}  // namespace redsync::cli
