#pragma once

// Process accounting from /proc: CPU time (utime + stime) of the bench and of
// the redis-server nodes, and resident memory.

#include "stats.hpp"

#include <chrono>
#include <cstdint>
#include <vector>

namespace bench {

class transport;

// utime + stime of `pid` in seconds; 0 if it cannot be read.
double cpu_seconds(long pid);
// VmRSS of this process in KiB.
long rss_kib();
// process_id of every node (INFO server), -1 where unknown.
std::vector<long> node_pids(transport& admin);

// CPU used by this process and by each node between start() and stop().
class cpu_probe {
 public:
  explicit cpu_probe(std::vector<long> node_pids) : pids_(std::move(node_pids)) {}
  void start();
  // {"bench_cpu_s", "nodes_cpu_s_sum", "bench_cpu_pct", "nodes_cpu_pct": [...],
  //  "nodes_cpu_pct_max", "nodes_cpu_pct_sum"}
  // where 100 = one core busy for the whole interval; with `ops` > 0 also
  // {"bench_cpu_us_per_op", "nodes_cpu_us_per_op"}: CPU time per operation
  // measured (clock-tick resolution, so only meaningful over many).
  json stop(std::size_t ops = 0);

 private:
  std::vector<long> pids_;
  std::chrono::steady_clock::time_point t0_{};
  double self0_ = 0;
  std::vector<double> nodes0_;
};

}  // namespace bench
