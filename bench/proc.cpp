#include "proc.hpp"

#include "transport.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace bench {

double cpu_seconds(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  // The command name (field 2) may contain spaces: parse after its ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

std::vector<long> node_pids(transport& admin) {
  std::vector<long> pids;
  for (std::size_t i = 0; i < admin.size(); ++i) {
    const auto s = admin.info_field(i, "server", "process_id");
    pids.push_back(s.empty() ? -1 : std::stol(s));
  }
  return pids;
}

void cpu_probe::start() {
  t0_ = std::chrono::steady_clock::now();
  self0_ = cpu_seconds(getpid());
  nodes0_.clear();
  for (const long p : pids_) nodes0_.push_back(p > 0 ? cpu_seconds(p) : 0.0);
}

json cpu_probe::stop(std::size_t ops) {
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double self = cpu_seconds(getpid()) - self0_;
  std::vector<double> nodes;
  for (std::size_t i = 0; i < pids_.size(); ++i) {
    nodes.push_back(pids_[i] > 0 ? 100.0 * (cpu_seconds(pids_[i]) - nodes0_[i]) / wall : 0.0);
  }
  double sum = 0, max = 0;
  for (const double n : nodes) {
    sum += n;
    max = std::max(max, n);
  }
  json j;
  double sum_s = 0;
  for (std::size_t i = 0; i < pids_.size(); ++i) sum_s += nodes[i] * wall / 100.0;
  j.num("bench_cpu_s", self)
      .num("nodes_cpu_s_sum", sum_s)
      .num("bench_cpu_pct", 100.0 * self / wall)
      .numbers("nodes_cpu_pct", nodes)
      .num("nodes_cpu_pct_max", max)
      .num("nodes_cpu_pct_sum", sum);
  if (ops > 0) {
    j.num("bench_cpu_us_per_op", 1e6 * self / static_cast<double>(ops))
        .num("nodes_cpu_us_per_op", 1e6 * sum_s / static_cast<double>(ops));
  }
  return j;
}

}  // namespace bench
