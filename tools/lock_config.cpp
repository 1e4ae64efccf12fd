#include "lock_config.hpp"

#include "args.hpp"
#include "node_command.hpp"
#include "node_list.hpp"

#include <redsync/options.hpp>
#include <redsync/semaphore.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace redsync::cli {
namespace {

constexpr auto lock_options = with_node_options(std::array<option_spec, 16>{{
    {"permits", 'n', true},
    {"shared", 's', false},
    {"ttl", 0, true},
    {"wait", 0, true},
    {"tries", 0, true},
    {"retry-delay", 0, true},
    {"drift-factor", 0, true},
    {"fail-fast", 0, false},
    {"no-restart-guard", 0, false},
    {"kill-grace", 0, true},
    {"report-every", 0, true},
    {"script-mode", 0, true},
    {"command", 'c', true},
    {"quiet", 'q', false},
    {"verbose", 'v', false},
    {"help", 'h', false},
}});

// floor(ttl * factor) in microseconds, as the library computes it
// (lib/redlock/quorum.hpp): the factor rounded to parts per billion, then
// integer arithmetic, so the bound below is exactly the library's.
std::int64_t scaled_us(std::chrono::milliseconds ttl, double factor) {
  const std::int64_t ppb = factor > 0 ? static_cast<std::int64_t>(factor * 1e9 + 0.5) : 0;
  return ttl.count() * (ppb / 1'000'000) + ttl.count() * (ppb % 1'000'000) / 1'000'000;
}

std::string ms_text(std::int64_t us) {
  return fmt::format("{:g} ms", static_cast<double>(us) / 1000.0);
}

}  // namespace

void check_ttl(std::chrono::milliseconds ttl, double drift_factor, std::string_view ttl_text) {
  // The library's rule (mutex_options.expiry): an attempt may wait the whole
  // per-node timeout, and with the drift on top no validity could be left.
  const double timeout_factor = mutex_options{}.timeout_factor;
  const std::int64_t drift = scaled_us(ttl, drift_factor) + 2000;
  const std::int64_t timeout = std::max<std::int64_t>(scaled_us(ttl, timeout_factor), 1000);
  if (ttl.count() * 1000 > drift + timeout) return;
  throw usage_error(fmt::format(
      "--ttl {} is too short: it must exceed the clock-drift allowance ({}: --drift-factor {:g} of it plus 2 "
      "ms) plus the per-node command timeout ({}: {:g} % of it, at least 1 ms), {} in all",
      ttl_text, ms_text(drift), drift_factor, ms_text(timeout), timeout_factor * 100,
      ms_text(drift + timeout)));
}

int parse_permits(std::string_view text) {
  return parse_int("-n/--permits", text, 1, Semaphore::max_permits);
}

redsync::script_mode parse_script_mode(std::string_view what, std::string_view text) {
  if (text == "eval") return redsync::script_mode::eval;
  if (text == "functions") return redsync::script_mode::functions;
  throw usage_error(fmt::format("{}: invalid script mode \"{}\" (expected eval or functions)", what, text));
}

lock_config parse_lock_config(std::span<char* const> argv) {
  const parsed_args args = parse_args(argv, lock_options);
  lock_config cfg;
  if (args.has("help")) {
    cfg.help = true;
    return cfg;
  }
  if (args.positionals.empty()) throw usage_error("lock: missing lock NAME");
  const std::string* shell_command = args.last("command");
  if (args.positionals.size() > 1) {
    if (!args.has_separator && shell_command == nullptr) {
      throw usage_error(fmt::format("lock: missing \"--\" before the command \"{}\"", args.positionals[1]));
    }
    throw usage_error(fmt::format("lock: unexpected argument \"{}\" (only one NAME)", args.positionals[1]));
  }
  if (args.has_separator && shell_command != nullptr) {
    throw usage_error("lock: give the command either after \"--\" or with -c, not both");
  }
  if (args.has_separator && args.after_separator.empty()) {
    throw usage_error("lock: missing command after \"--\"");
  }
  if (shell_command != nullptr && shell_command->empty()) throw usage_error("-c: empty command");
  cfg.name = args.positionals[0];
  if (cfg.name.empty()) throw usage_error("lock: empty lock NAME");
  // As flock -c: one string for the shell. Without a command: hold mode.
  if (shell_command != nullptr) {
    cfg.command = {"/bin/sh", "-c", *shell_command};
  } else {
    cfg.command = args.after_separator;
  }
  cfg.nodes = resolve_nodes(args);

  if (const std::string* v = args.last("drift-factor")) {
    cfg.drift_factor = parse_double("--drift-factor", *v);
    if (*cfg.drift_factor >= 1.0) {
      throw usage_error(fmt::format("--drift-factor: must be in [0, 1), got \"{}\"", *v));
    }
  }
  if (const std::string* v = args.last("ttl")) {
    cfg.ttl = parse_duration("--ttl", *v);
    if (cfg.ttl.count() == 0) throw usage_error(fmt::format("--ttl: must be greater than 0, got \"{}\"", *v));
    check_ttl(cfg.ttl, cfg.drift_factor.value_or(mutex_options{}.drift_factor), *v);
  } else {
    check_ttl(cfg.ttl, cfg.drift_factor.value_or(mutex_options{}.drift_factor), "8s (the default)");
  }
  if (const std::string* v = args.last("wait")) cfg.wait = parse_duration("--wait", *v);
  if (const std::string* v = args.last("tries")) cfg.tries = parse_int("--tries", *v, 1, INT_MAX);
  if (const std::string* v = args.last("retry-delay")) cfg.retry_delay = parse_duration("--retry-delay", *v);
  if (const std::string* v = args.last("kill-grace")) cfg.kill_grace = parse_duration("--kill-grace", *v);
  if (const std::string* v = args.last("report-every")) {
    cfg.report_every = parse_duration("--report-every", *v);
  }
  cfg.fail_fast = args.has("fail-fast");
  cfg.shared = args.has("shared");
  if (const std::string* v = args.last("permits")) {
    cfg.permits = parse_permits(*v);
    if (cfg.fail_fast)
      throw usage_error("--fail-fast: not available with -n (a permit's attempt asks every node)");
    // A semaphore's permits are all alike: there is no shared kind of one.
    if (cfg.shared)
      throw usage_error(
          "-s/--shared: not available with -n/--permits (a permit of a semaphore is neither shared nor "
          "exclusive; give one of them)");
  }
  // The restart guard keeps freshly started nodes out of the quorum; a
  // throw-away test cluster may turn it off (also via the environment, so a
  // test harness can set it once).
  const char* guard_env = std::getenv("REDSYNC_RESTART_GUARD");
  cfg.restart_guard = !args.has("no-restart-guard") && !(guard_env && std::string_view(guard_env) == "0");
  // As the node list: the option, else the environment (set once for every
  // lock of a deployment whose ACL denies EVAL), else the library's default.
  if (const std::string* v = args.last("script-mode")) {
    cfg.script_mode = parse_script_mode("--script-mode", *v);
  } else if (const char* env = std::getenv("REDSYNC_SCRIPT_MODE"); env != nullptr && *env != '\0') {
    cfg.script_mode = parse_script_mode("REDSYNC_SCRIPT_MODE", env);
  }
  cfg.verbosity = args.count("verbose") - args.count("quiet");
  return cfg;
}

}  // namespace redsync::cli
