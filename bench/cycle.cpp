// Uncontended cycle: one name, one Mutex, sequential blocking lock + unlock
// with an unbounded context. Acquire, release and the whole cycle are timed
// separately.

#include "bench.hpp"
#include "proc.hpp"
#include "server_cpu.hpp"
#include "transport.hpp"

#include <redsync/redsync.hpp>

namespace bench {

json run_cycle(const config& cfg) {
  using clock = std::chrono::steady_clock;
  transport admin(cfg.nodes);
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  cpu_probe cpu(node_pids(admin));
  precise_cpu precise(admin);
  auto m = rs.new_mutex(unique_name("cycle"));
  samples acquire, release, cycle;
  for (auto* s : {&acquire, &release, &cycle}) s->reserve(static_cast<std::size_t>(cfg.iterations));
  int failures = 0;
  for (int i = 0; cfg.cycle_default && i < cfg.warmup + cfg.iterations; ++i) {
    if (i == cfg.warmup) {
      cpu.start();
      precise.start();
    }
    const auto t0 = clock::now();
    const auto l = m.lock(redsync::context{});
    const auto t1 = clock::now();
    const auto u = m.unlock(redsync::context{});
    const auto t2 = clock::now();
    if (!l || !u) ++failures;
    if (i < cfg.warmup) continue;
    acquire.add(t1 - t0);
    release.add(t2 - t1);
    cycle.add(t2 - t0);
  }
  if (!cfg.cycle_default) {  // nothing measured: empty figures, not a probe never started
    cpu.start();
    precise.start();
  }
  const json exact = precise.stop(static_cast<std::size_t>(cfg.iterations));
  const json usage = cpu.stop(static_cast<std::size_t>(cfg.iterations));
  // The same cycle with fail_fast: each call returns once a quorum has
  // answered, which is what node-redlock always does.
  auto fast = rs.new_mutex(unique_name("cycle-fail-fast"), {.fail_fast = true});
  samples fast_cycle;
  fast_cycle.reserve(static_cast<std::size_t>(cfg.iterations));
  for (int i = 0; cfg.cycle_fail_fast && i < cfg.warmup + cfg.iterations; ++i) {
    const auto t0 = clock::now();
    const auto l = fast.lock(redsync::context{});
    const auto u = fast.unlock(redsync::context{});
    if (!l || !u) ++failures;
    if (i >= cfg.warmup) fast_cycle.add(clock::now() - t0);
  }
  json j;
  j.object("cpu", usage)
      .object("cpu_precise", exact)
      .object("acquire", acquire.summary())
      .object("release", release.summary())
      .object("cycle", cycle.summary())
      .object("cycle_fail_fast", fast_cycle.summary())
      .integer("failures", failures);
  return j;
}

}  // namespace bench
