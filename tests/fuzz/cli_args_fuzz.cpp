// libFuzzer target: the redsync tool's command line (tools/args.cpp and
// tools/lock_config.cpp).
//
// The input is split on NUL and newline into arguments, which go through
// `redsync lock`'s parser, the option splitter with every command's options,
// and, one by one, the duration, number (-n among them) and node-list
// parsers. Only usage_error may escape (anything else is a finding), and
// what parses is in range: durations within 0..7 days, numbers within their bounds, node lists
// non-empty and each URI valid; a --ttl the tool accepts the library accepts
// too, and the other way round.

#include "args.hpp"
#include "fuzz_check.hpp"
#include "lock_config.hpp"
#include "node_list.hpp"
#include "redlock/options_check.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>
#include <redsync/semaphore.hpp>

#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace redsync::cli;
using redsync::fuzz::check;

// The options of lock, status and ping together, with short forms.
constexpr std::array<option_spec, 19> all_options{{
    {"nodes", 0, true},        {"permits", 'n', true},   {"ttl", 0, true},
    {"wait", 0, true},         {"tries", 0, true},       {"retry-delay", 0, true},
    {"drift-factor", 0, true}, {"fail-fast", 0, false},  {"no-restart-guard", 0, false},
    {"kill-grace", 0, true},   {"value", 0, true},       {"timeout", 0, true},
    {"report-every", 0, true}, {"script-mode", 0, true}, {"command", 'c', true},
    {"json", 0, false},        {"quiet", 'q', false},    {"verbose", 'v', false},
    {"help", 'h', false},
}};

constexpr std::chrono::milliseconds max_duration = std::chrono::hours{7 * 24};

bool valid_uri(const std::string& uri) {
  try {
    (void)redsync::member_options::parse(uri);
    return true;
  } catch (const redsync::config_error&) {
    return false;
  }
}

void check_duration(std::chrono::milliseconds d) {
  check(d.count() >= 0 && d <= max_duration, "a duration outside 0..7 days");
}

void check_nodes(const std::vector<std::string>& nodes) {
  check(!nodes.empty(), "an empty node list");
  for (const auto& uri : nodes) check(valid_uri(uri), "a node list holds an invalid URI");
}

// Whether the library takes `ttl` with `drift_factor` (and the tool's other
// settings, which never break its rules).
bool library_accepts(std::chrono::milliseconds ttl, double drift_factor) {
  try {
    redsync::detail::check_mutex_options("name", {.expiry = ttl, .drift_factor = drift_factor});
    return true;
  } catch (const redsync::config_error&) {
    return false;
  }
}

void fuzz_lock(std::span<char* const> argv) {
  lock_config cfg;
  try {
    cfg = parse_lock_config(argv);
  } catch (const usage_error&) {
    return;
  }
  if (cfg.help) return;
  check(!cfg.name.empty(), "lock: empty NAME accepted");
  // No command is hold mode; -c STRING runs /bin/sh -c STRING (a command
  // after "--" is taken as given: an empty name fails to run, with 127).
  if (cfg.command.size() == 3 && cfg.command[0] == "/bin/sh" && cfg.command[1] == "-c") {
    check(!cfg.command[2].empty(), "lock: empty -c STRING accepted");
  }
  check_nodes(cfg.nodes);
  check(cfg.ttl.count() > 0, "lock: --ttl 0 accepted");
  check_duration(cfg.ttl);
  check(library_accepts(cfg.ttl, cfg.drift_factor.value_or(0.01)),
        "lock: a --ttl the library refuses accepted");
  check_duration(cfg.report_every);
  if (cfg.wait) check_duration(*cfg.wait);
  if (cfg.retry_delay) check_duration(*cfg.retry_delay);
  check_duration(cfg.kill_grace);
  if (cfg.tries) check(*cfg.tries >= 1, "lock: --tries below 1 accepted");
  if (cfg.permits) {
    check(*cfg.permits >= 1 && *cfg.permits <= redsync::Semaphore::max_permits,
          "lock: -n outside 1..1024 accepted");
    check(!cfg.fail_fast, "lock: -n with --fail-fast accepted");
  }
  if (cfg.drift_factor) {
    check(std::isfinite(*cfg.drift_factor) && *cfg.drift_factor >= 0 && *cfg.drift_factor < 1,
          "lock: --drift-factor outside [0, 1) accepted");
  }
  check(!(cfg.quiet() && cfg.verbose()), "lock: quiet and verbose at once");
  check(cfg.script_mode == redsync::script_mode::eval || cfg.script_mode == redsync::script_mode::functions,
        "lock: a script mode that is neither eval nor functions");
}

void fuzz_split(std::span<char* const> argv) {
  parsed_args args;
  try {
    args = parse_args(argv, all_options);
  } catch (const usage_error&) {
    return;
  }
  for (const auto& [name, value] : args.options) {
    const option_spec* spec = nullptr;
    for (const auto& s : all_options)
      if (s.long_name == name) spec = &s;
    check(spec != nullptr, "parse_args returned an option nobody asked for");
    if (!spec->takes_value) check(value.empty(), "a flag got a value");
  }
  check(args.has_separator || args.after_separator.empty(), "arguments after a \"--\" that was not there");
  // Positionals and what follows "--" are input arguments; options may be
  // more than their arguments ("-vv" is two), but each takes a character.
  check(args.positionals.size() + args.after_separator.size() + (args.has_separator ? 1u : 0u) <= argv.size(),
        "more arguments out than in");
  std::size_t characters = 0;
  for (const char* a : argv) characters += std::string_view(a).size();
  check(args.options.size() <= characters, "more options out than characters in");
}

void fuzz_values(const std::string& arg) {
  try {
    const std::chrono::milliseconds d = parse_duration("--ttl", arg);
    check_duration(d);
    for (double drift_factor : {0.0, 0.01, 0.5, 0.95}) {
      bool tool_accepts = true;
      try {
        check_ttl(d, drift_factor, arg);
      } catch (const usage_error&) {
        tool_accepts = false;
      }
      check(tool_accepts == (d.count() > 0 && library_accepts(d, drift_factor)),
            "the tool and the library disagree about a --ttl");
    }
  } catch (const usage_error&) {
  }
  try {
    const int v = parse_int("--tries", arg, 1, INT_MAX);
    check(v >= 1, "parse_int below its minimum");
  } catch (const usage_error&) {
  }
  try {
    const int v = parse_int("--x", arg, -5, 5);
    check(v >= -5 && v <= 5, "parse_int outside its bounds");
  } catch (const usage_error&) {
  }
  try {
    const int k = parse_permits(arg);
    check(k >= 1 && k <= redsync::Semaphore::max_permits, "parse_permits outside 1..1024");
  } catch (const usage_error&) {
  }
  try {
    const double d = parse_double("--drift-factor", arg);
    check(std::isfinite(d) && d >= 0, "parse_double gave a negative or non-finite number");
  } catch (const usage_error&) {
  }
  try {
    check_nodes(parse_nodes("--nodes", arg));
  } catch (const usage_error&) {
  }
  try {
    const redsync::script_mode m = parse_script_mode("--script-mode", arg);
    check(arg == (m == redsync::script_mode::eval ? "eval" : "functions"), "a script mode from another word");
  } catch (const usage_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The parsers read these; the fuzzer's results must not depend on them.
  unsetenv("REDSYNC_NODES");
  unsetenv("REDSYNC_RESTART_GUARD");
  unsetenv("REDSYNC_SCRIPT_MODE");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n') {
      args.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty() || args.empty()) args.push_back(std::move(current));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());

  fuzz_lock(argv);
  fuzz_split(argv);
  for (const auto& a : args) fuzz_values(a);
  return 0;
}
