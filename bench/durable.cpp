// Durable mode's cost (mutex_options::durable_replicas; docs/cluster.md,
// "Durable mode"): the same uncontended lock + unlock cycle, and the same
// throughput with several lockers on distinct names, without and with
// WAIT 1 behind each acquisition. Every node must have at least one
// replica (scripts/bench --only-durable starts one per node).

#include "bench.hpp"

#include <redsync/redsync.hpp>

#include <atomic>
#include <deque>
#include <future>
#include <thread>
#include <utility>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;

redsync::mutex_options durable_bench_options(bool durable) {
  redsync::mutex_options o;
  if (durable) o.durable_replicas = 1;
  return o;
}

json durable_cycle(const config& cfg, bool durable, int& failures) {
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  auto m =
      rs.new_mutex(unique_name(durable ? "durable-cycle" : "plain-cycle"), durable_bench_options(durable));
  samples acquire, cycle;
  for (int i = 0; i < cfg.warmup + cfg.iterations; ++i) {
    const auto t0 = clock::now();
    const auto l = m.lock(redsync::context{});
    const auto t1 = clock::now();
    const auto u = m.unlock(redsync::context{});
    if (!l || !u) ++failures;
    if (i < cfg.warmup) continue;
    acquire.add(t1 - t0);
    cycle.add(clock::now() - t0);
  }
  json j;
  j.object("acquire", acquire.summary()).object("cycle", cycle.summary());
  return j;
}

// K lockers on K names, each looping lock_async -> unlock_async.
struct durable_locker {
  redsync::Mutex m;
  std::atomic<bool>& stopping;
  std::atomic<std::uint64_t>& cycles;
  std::atomic<std::uint64_t>& errors;
  std::atomic<int>& active;
  std::promise<void>& all_stopped;

  void step() {
    if (stopping.load()) {
      if (active.fetch_sub(1) == 1) all_stopped.set_value();
      return;
    }
    m.lock_async({}, [this](redsync::result r) {
      if (!r) {
        errors.fetch_add(1);
        return step();
      }
      m.unlock_async({}, [this](redsync::result u) {
        if (!u) errors.fetch_add(1);
        cycles.fetch_add(1);
        step();
      });
    });
  }
};

// `pool_size` connections per node: a WAIT holds up every command behind it
// on its connection, so more connections let more WAITs run at once.
json durable_throughput(const config& cfg, bool durable, int k, std::size_t pool_size) {
  redsync::redsync_options ro = bench_redsync_options();
  ro.pool_size = pool_size;
  redsync::Redsync rs(cfg.nodes, ro);
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> cycles{0}, errors{0};
  std::atomic<int> active{k};
  std::promise<void> all_stopped;
  std::deque<durable_locker> lockers;
  for (int i = 0; i < k; ++i)
    lockers.push_back({rs.new_mutex(unique_name("durable-tp"), durable_bench_options(durable)), stopping,
                       cycles, errors, active, all_stopped});
  for (auto& l : lockers) l.step();
  std::this_thread::sleep_for(cfg.duration / 10);  // warm-up
  const auto c0 = cycles.load();
  const auto t0 = clock::now();
  std::this_thread::sleep_for(cfg.duration);
  const auto c1 = cycles.load();
  const auto t1 = clock::now();
  stopping = true;
  all_stopped.get_future().wait();
  json j;
  j.integer("lockers", k)
      .integer("pool_size", static_cast<std::int64_t>(pool_size))
      .num("cycles_per_s", static_cast<double>(c1 - c0) / std::chrono::duration<double>(t1 - t0).count())
      .integer("errors", static_cast<std::int64_t>(errors.load()));
  return j;
}

}  // namespace

json run_durable(const config& cfg) {
  int failures = 0;
  json plain = durable_cycle(cfg, false, failures);
  json waited = durable_cycle(cfg, true, failures);
  std::vector<json> points;
  for (const int k : {1, 16, 64})
    for (const auto& [durable, pool] : {std::pair{false, 1}, std::pair{true, 1}, std::pair{true, 8}}) {
      json p = durable_throughput(cfg, durable, k, static_cast<std::size_t>(pool));
      p.flag("durable", durable);
      points.push_back(std::move(p));
    }
  json j;
  j.object("plain", plain)
      .object("durable", waited)
      .array("throughput", points)
      .integer("failures", failures);
  return j;
}

}  // namespace bench
