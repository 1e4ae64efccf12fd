// Throughput: K lockers on K distinct names in one process, each looping
// lock_async -> unlock_async (callbacks on the loop thread) for a fixed
// window after a warm-up. Reports cycles/s, per-cycle latency, and the CPU
// used meanwhile by this process and by every redis-server, which says
// whether the client or the servers are the limit.

#include "bench.hpp"
#include "proc.hpp"
#include "transport.hpp"

#include <redsync/redsync.hpp>

#include <atomic>
#include <deque>
#include <future>
#include <thread>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;

struct run_state {
  std::atomic<bool> measuring{false};
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> cycles{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<int> active{0};
  std::promise<void> all_stopped;
};

struct locker {
  redsync::Mutex m;
  run_state& run;
  samples latency;  // loop thread only, read after all_stopped

  void step() {
    if (run.stopping.load(std::memory_order_relaxed)) return stop();
    const auto t0 = clock::now();
    m.lock_async({}, [this, t0](redsync::result r) {
      if (!r) {
        run.errors.fetch_add(1, std::memory_order_relaxed);
        return step();
      }
      m.unlock_async({}, [this, t0](redsync::result u) {
        if (!u) run.errors.fetch_add(1, std::memory_order_relaxed);
        if (run.measuring.load(std::memory_order_relaxed)) {
          latency.add(clock::now() - t0);
          run.cycles.fetch_add(1, std::memory_order_relaxed);
        }
        step();
      });
    });
  }

  void stop() {
    if (run.active.fetch_sub(1) == 1) run.all_stopped.set_value();
  }
};

}  // namespace

json throughput_point(const config& cfg, const std::vector<std::string>& names,
                      const std::vector<long>& pids) {
  const int k = static_cast<int>(names.size());
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  run_state run;
  std::deque<locker> lockers;
  for (const auto& name : names) lockers.push_back(locker{rs.new_mutex(name), run, {}});
  run.active = k;
  for (auto& l : lockers) l.step();

  std::this_thread::sleep_for(cfg.duration / 10);  // warm-up: connections, scripts, caches
  cpu_probe cpu(pids);
  cpu.start();
  const auto c0 = run.cycles.load();
  const auto t0 = clock::now();
  run.measuring = true;
  std::this_thread::sleep_for(cfg.duration);
  run.measuring = false;
  const auto c1 = run.cycles.load();
  const auto t1 = clock::now();
  json usage = cpu.stop();
  run.stopping = true;
  run.all_stopped.get_future().wait();

  samples latency;
  for (const auto& l : lockers) latency.append(l.latency);
  const double secs = std::chrono::duration<double>(t1 - t0).count();
  json j;
  j.integer("lockers", k)
      .num("cycles_per_s", static_cast<double>(c1 - c0) / secs)
      .num("seconds", secs)
      .object("cycle", latency.summary())
      .object("cpu", usage)
      .integer("errors", static_cast<std::int64_t>(run.errors.load()));
  return j;
}

json run_throughput(const config& cfg) {
  std::vector<long> pids;
  {
    transport admin(cfg.nodes);
    pids = node_pids(admin);
  }
  std::vector<json> points;
  for (const int k : cfg.lockers) {
    std::vector<std::string> names;
    for (int i = 0; i < k; ++i) names.push_back(unique_name("tp"));
    points.push_back(throughput_point(cfg, names, pids));
  }
  json j;
  j.array("points", points);
  return j;
}

}  // namespace bench
