#pragma once

#include <redsync/options.hpp>

// redsync_bench: one measurement per `--only` name, each printing a JSON
// object. scripts/bench runs them against a 5-node testbed and merges them.

#include "stats.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace bench {

// The benchmark measures speed on nodes it has just started; the restart
// guard (on by default) would keep them out of every quorum for the expiry.
inline redsync::redsync_options bench_redsync_options() {
  redsync::redsync_options o;
  o.restart_guard = false;
  return o;
}

struct config {
  // redis://host:port of every node.
  std::vector<std::string> nodes;
  // Samples per latency figure (floor, cycle, degraded), after `warmup`.
  int iterations = 2000;
  int warmup = 200;
  // degraded: samples for the mode that waits for every node (without
  // fail_fast), where a frozen node makes each cycle take two timeouts.
  // 0 = `iterations`.
  int slow_iterations = 0;
  // Measured window per throughput / hand-over point (after a warm-up of
  // a tenth of it for throughput).
  std::chrono::milliseconds duration{3000};
  // failed_lock: acquisition tries (0 = library default, 32).
  int tries = 0;
  // degraded: a label for the cluster state ("2 stopped", ...).
  std::string label;
  // cycle: which cycles to time, the default one (waits for every node)
  // and the fail_fast one; one alone when counting its system calls.
  bool cycle_default = true;
  bool cycle_fail_fast = true;
  std::vector<int> lockers{1, 16, 64, 256};
  std::vector<int> contenders{2, 8, 32};
  // contention: processes per point, and the contender program (default:
  // redsync_contender next to this program).
  std::vector<int> contention{2, 4, 8, 32, 64};
  std::string contender;
  // semaphore: k of each point, and the processes contending.
  std::vector<int> semaphore_permits{1, 4, 16};
  int semaphore_contenders = 64;
  // memory: locks held at once.
  int locks = 10000;
  // rw: threads of the mixed read-write point.
  int rw_threads = 16;
};

json run_floor(const config& cfg);
// The raw-epoll probe (bench/floor_epoll.c) in both modes: {"all", "quorum"}.
json run_floor_epoll(const config& cfg);
json run_cycle(const config& cfg);
json run_throughput(const config& cfg);
json run_handover(const config& cfg);
json run_degraded(const config& cfg);
json run_failed_lock(const config& cfg);
json run_memory(const config& cfg);
json run_ladder(const config& cfg);
json run_contention(const config& cfg);
json run_semaphore(const config& cfg);
// The read-write lock's cycles and mixed point, and the coroutine cycle (rw.cpp).
json run_rw(const config& cfg);
json run_cluster(const config& cfg);
// The blocking cycle alone, standalone against cluster members whose
// masters have replicas (masters' CPU and commandstats).
json run_cluster_cycle(const config& cfg);

// One throughput point (throughput.cpp): a locker per name on cfg.nodes,
// each looping lock_async -> unlock_async for cfg.duration after a tenth of
// it as warm-up; `pids` are the servers whose CPU is reported.
json throughput_point(const config& cfg, const std::vector<std::string>& names,
                      const std::vector<long>& pids);

json run_durable(const config& cfg);

// A program built next to redsync_bench (bench/meson.build): its path.
// Throws std::runtime_error when this program's own path is unknown.
std::string program_next_to_self(std::string_view name);

// A name no other run of the bench uses: "bench:<what>:<pid>:<counter>".
std::string unique_name(std::string_view what);

}  // namespace bench
