#pragma once

// CPU time with microsecond resolution, for per-cycle figures that /proc's
// 10 ms clock ticks cannot resolve over a few thousand cycles: each
// redis-server's own account (INFO cpu: used_cpu_sys + used_cpu_user,
// from getrusage) and this process's (getrusage).

#include "stats.hpp"

#include <cstddef>
#include <vector>

namespace bench {

class transport;

class precise_cpu {
 public:
  // `admin` must outlive the probe; it is used from the calling thread.
  explicit precise_cpu(transport& admin) : admin_(admin) {}
  void start();
  // {"client_cpu_us_per_op", "nodes_cpu_us_per_op"} (nodes: the sum over
  // every node) over `ops` operations since start().
  json stop(std::size_t ops);

 private:
  double nodes_seconds();
  transport& admin_;
  double nodes0_ = 0;
  double self0_ = 0;
};

// This process's user + system CPU seconds (getrusage).
double self_cpu_seconds();

}  // namespace bench
