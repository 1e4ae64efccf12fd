// What `redsync lock` was asked to do, parsed and checked.
#pragma once

#include <redsync/options.hpp>

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace redsync::cli {

struct lock_config {
  bool help = false;  ///< --help: print help, do nothing else
  std::string name;   ///< the lock name (Redis key), or the semaphore's with -n
  /// -n/--permits K: acquire one of K permits of the semaphore NAME instead
  /// of the mutex NAME. nullopt = the mutex.
  std::optional<int> permits;
  /// -s/--shared: a shared hold of NAME (an RWMutex's reader, flock -s):
  /// any number of shared holders at once, none while an exclusive one
  /// holds. false = exclusive, as a Mutex of NAME (an RWMutex's writer).
  bool shared = false;
  std::vector<std::string> nodes;       ///< node URIs, validated
  std::chrono::milliseconds ttl{8000};  ///< --ttl, default 8s
  /// --wait: nullopt = keep trying without a deadline; 0 = exactly one try.
  std::optional<std::chrono::milliseconds> wait;
  std::optional<int> tries;                              ///< --tries; default unlimited (INT_MAX)
  std::optional<std::chrono::milliseconds> retry_delay;  ///< --retry-delay; default random
  std::optional<double> drift_factor;                    ///< --drift-factor; default the library's
  bool fail_fast = false;                                ///< --fail-fast
  bool restart_guard = true;                   ///< off with --no-restart-guard or REDSYNC_RESTART_GUARD=0
  std::chrono::milliseconds kill_grace{5000};  ///< --kill-grace, default 5s
  /// --script-mode, else $REDSYNC_SCRIPT_MODE, else eval: how the library
  /// runs its scripts (functions: FCALL, for users denied EVAL by ACL).
  redsync::script_mode script_mode = redsync::script_mode::eval;
  /// --report-every: while waiting, say why on stderr this often (the first
  /// time after min(2s, this)); 0 = never. Default 10s.
  std::chrono::milliseconds report_every{10'000};
  /// Each -v adds one, each -q takes one away: < 0 quiet, 0 default,
  /// 1 verbose, 2 (-vv) also each node's detail in the waiting reports.
  int verbosity = 0;
  /// What to run: the arguments after "--", or {"/bin/sh", "-c", STRING} for
  /// -c STRING; empty = hold mode (hold the lock until a signal).
  std::vector<std::string> command;

  bool quiet() const { return verbosity < 0; }
  bool verbose() const { return verbosity > 0; }
  bool hold() const { return command.empty(); }
  bool semaphore() const { return permits.has_value(); }
  bool one_try() const { return wait && wait->count() == 0; }
};

/// Parses the arguments after `lock`. Throws usage_error naming the bad
/// argument in the tool's own terms: an unknown option, a bad value (also in
/// $REDSYNC_SCRIPT_MODE), a --ttl too short for the library's rules, a
/// missing NAME, a command given both after "--" and with -c, an empty
/// command, a -n that is not a number in 1..Semaphore::max_permits, -n with
/// --fail-fast, -n with --shared.
lock_config parse_lock_config(std::span<char* const> args);

/// The smallest --ttl the library accepts with `drift_factor`: it must
/// exceed the drift allowance (ttl * drift_factor + 2 ms) plus the per-node
/// command timeout (ttl / 20, at least 1 ms). Throws usage_error naming the
/// option when `ttl` is not above it.
void check_ttl(std::chrono::milliseconds ttl, double drift_factor, std::string_view ttl_text);

/// Parses the K of -n/--permits: an integer in 1..Semaphore::max_permits.
/// Throws usage_error naming the option and the value otherwise.
int parse_permits(std::string_view text);

/// Parses "eval" or "functions". `what` names the source in the error
/// ("--script-mode", "REDSYNC_SCRIPT_MODE"). Throws usage_error otherwise.
redsync::script_mode parse_script_mode(std::string_view what, std::string_view text);

}  // namespace redsync::cli
