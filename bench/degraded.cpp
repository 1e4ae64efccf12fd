// Degraded cluster (prepared by scripts/bench: nodes SIGSTOPped or killed):
// - degraded: sequential lock + unlock cycles, with and without fail_fast;
// - failed_lock: how long one `lock` takes to give up when no quorum is
//   possible, against the bound tries x (command timeout + max retry delay).

#include "bench.hpp"

#include <redsync/redsync.hpp>

#include <algorithm>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;

json cycles(redsync::Redsync& rs, const config& cfg, bool fail_fast, int iterations) {
  auto m = rs.new_mutex(unique_name("degraded"), {.fail_fast = fail_fast});
  samples cycle;
  int failures = 0;
  const int warmup = std::min(cfg.warmup, iterations);
  for (int i = 0; i < warmup + iterations; ++i) {
    const auto t0 = clock::now();
    const auto l = m.lock(redsync::context{});
    const auto u = l ? m.unlock(redsync::context{}) : redsync::result{};
    if (!l || !u) ++failures;
    if (i >= warmup) cycle.add(clock::now() - t0);
  }
  json j;
  j.flag("fail_fast", fail_fast).object("cycle", cycle.summary()).integer("failures", failures);
  return j;
}

}  // namespace

json run_degraded(const config& cfg) {
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  json j;
  j.text("state", cfg.label)
      .object("default",
              cycles(rs, cfg, false, cfg.slow_iterations > 0 ? cfg.slow_iterations : cfg.iterations))
      .object("fail_fast", cycles(rs, cfg, true, cfg.iterations));
  return j;
}

json run_failed_lock(const config& cfg) {
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  redsync::mutex_options opts;
  if (cfg.tries > 0) opts.tries = cfg.tries;
  auto m = rs.new_mutex(unique_name("failed"), opts);
  const auto t0 = clock::now();
  const auto r = m.lock(redsync::context{});
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  // Per attempt: one command timeout (expiry x timeout_factor), then at most
  // the largest default retry delay (250 ms) before the next one.
  const double timeout_s = std::chrono::duration<double>(opts.expiry).count() * opts.timeout_factor;
  const double bound = opts.tries * (timeout_s + 0.250);
  const double expected = opts.tries * timeout_s + (opts.tries - 1) * 0.150;
  json j;
  j.text("state", cfg.label)
      .integer("tries", opts.tries)
      .flag("failed", !r)
      .text("error", r ? "none" : r.error.message())
      .integer("attempts", r.attempts)
      .num("seconds", secs)
      .num("bound_s", bound)
      .num("expected_s", expected)
      .flag("within_bound", secs <= bound);
  return j;
}

}  // namespace bench
