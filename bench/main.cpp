// redsync_bench --nodes URI,... [--only NAME] [--iterations N] [--json]
// Measurements: floor, floor_epoll, cycle, throughput, handover, degraded, failed_lock,
// memory, ladder, contention, semaphore, rw, cluster (default: floor,cycle,throughput,handover,memory; the
// degraded ones need a cluster prepared by scripts/bench).

#include "bench.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace bench {

std::string program_next_to_self(std::string_view name) {
  char self[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw std::runtime_error(fmt::format("cannot find {}: /proc/self/exe unreadable", name));
  return (std::filesystem::path(std::string(self, static_cast<std::size_t>(n))).parent_path() / name)
      .string();
}

std::string unique_name(std::string_view what) {
  static std::atomic<int> counter{0};
  return fmt::format("bench:{}:{}:{}", what, getpid(), counter++);
}

}  // namespace bench

namespace {

const char* const usage = R"(usage: redsync_bench --nodes URI,URI,... [options]
  --only NAME[,NAME]   floor, floor_epoll, cycle, throughput, handover, degraded, failed_lock,
                       memory, ladder, contention, semaphore, rw, cluster,
                       cluster_cycle, durable
                       (cluster, cluster_cycle: --nodes lists standalone and
                       redis+cluster:// members, 3 of each in scripts/bench;
                       cluster_cycle: the blocking cycle alone, for members
                       whose masters have replicas; durable: every
                       node needs a replica, scripts/bench --only-durable)
                       (default: floor,cycle,throughput,handover,memory)
  --iterations N       samples per latency figure (default 2000)
  --warmup N           unmeasured iterations first (default 200)
  --slow-iterations N  degraded: samples without fail_fast (default: --iterations)
  --duration-ms N      window per throughput/hand-over point (default 3000)
  --lockers A,B,..     throughput concurrency (default 1,16,64,256)
  --contenders A,B,..  hand-over contenders (default 2,8,32)
  --contention A,B,..  contention: processes per point (default 2,4,8,32,64)
  --contender PATH     contention: the contender program (default: redsync_contender
                       next to this program)
  --semaphore-permits A,B,..  semaphore: k of each point (default 1,4,16)
  --semaphore-contenders N    semaphore: processes (default 64; redsync_sem_contender
                       next to this program)
  --locks N            memory: locks held at once (default 10000)
  --rw-threads N       rw: threads of the mixed read-write point (default 16)
  --tries N            failed_lock: tries (default: the library's, 32)
  --label TEXT         degraded: what state the cluster is in
  --cycle-modes LIST   cycle: default,fail_fast (default both; one alone
                       to count its system calls)
  --json               print one JSON object on stdout (the only output format)
)";

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  std::stringstream in{std::string(s)};
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<int> split_ints(std::string_view s) {
  std::vector<int> out;
  for (const auto& v : split(s)) out.push_back(std::stoi(v));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bench::config cfg;
  std::vector<std::string> only{"floor", "cycle", "throughput", "handover", "memory"};
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      auto value = [&]() -> std::string_view {
        if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", a));
        return argv[++i];
      };
      if (a == "--nodes") {
        cfg.nodes = split(value());
      } else if (a == "--only") {
        only = split(value());
      } else if (a == "--iterations") {
        cfg.iterations = std::stoi(std::string(value()));
      } else if (a == "--warmup") {
        cfg.warmup = std::stoi(std::string(value()));
      } else if (a == "--slow-iterations") {
        cfg.slow_iterations = std::stoi(std::string(value()));
      } else if (a == "--duration-ms") {
        cfg.duration = std::chrono::milliseconds{std::stoi(std::string(value()))};
      } else if (a == "--lockers") {
        cfg.lockers = split_ints(value());
      } else if (a == "--contenders") {
        cfg.contenders = split_ints(value());
      } else if (a == "--contention") {
        cfg.contention = split_ints(value());
      } else if (a == "--contender") {
        cfg.contender = value();
      } else if (a == "--semaphore-permits") {
        cfg.semaphore_permits = split_ints(value());
      } else if (a == "--semaphore-contenders") {
        cfg.semaphore_contenders = std::stoi(std::string(value()));
      } else if (a == "--rw-threads") {
        cfg.rw_threads = std::stoi(std::string(value()));
      } else if (a == "--locks") {
        cfg.locks = std::stoi(std::string(value()));
      } else if (a == "--tries") {
        cfg.tries = std::stoi(std::string(value()));
      } else if (a == "--label") {
        cfg.label = value();
      } else if (a == "--cycle-modes") {
        cfg.cycle_default = cfg.cycle_fail_fast = false;
        for (const auto& mode : split(value())) {
          if (mode == "default") {
            cfg.cycle_default = true;
          } else if (mode == "fail_fast") {
            cfg.cycle_fail_fast = true;
          } else {
            throw std::invalid_argument(
                fmt::format("--cycle-modes: unknown mode '{}' (default, fail_fast)", mode));
          }
        }
      } else if (a == "--json") {
        // The output is always one JSON object; the flag is accepted for clarity.
      } else if (a == "--help" || a == "-h") {
        std::fputs(usage, stdout);
        return 0;
      } else {
        throw std::invalid_argument(fmt::format("unknown argument '{}'", a));
      }
    }
    if (cfg.nodes.empty()) throw std::invalid_argument("--nodes is required");
  } catch (const std::exception& e) {
    fmt::print(stderr, "redsync_bench: {}\n{}", e.what(), usage);
    return 2;
  }

  const std::map<std::string_view, std::function<bench::json(const bench::config&)>> runs{
      {"floor", bench::run_floor},
      {"floor_epoll", bench::run_floor_epoll},  // the probe next to this program
      {"cycle", bench::run_cycle},
      {"throughput", bench::run_throughput},
      {"handover", bench::run_handover},
      {"degraded", bench::run_degraded},
      {"failed_lock", bench::run_failed_lock},
      {"memory", bench::run_memory},
      {"ladder", bench::run_ladder},
      {"contention", bench::run_contention},
      {"semaphore", bench::run_semaphore},
      {"rw", bench::run_rw},
      {"cluster", bench::run_cluster},
      {"cluster_cycle", bench::run_cluster_cycle},  // scripts/bench --only-cluster, members with replicas
      {"durable", bench::run_durable},  // every node needs a replica: scripts/bench --only-durable
  };
  bench::json out;
  try {
    for (const auto& name : only) {
      const auto it = runs.find(name);
      if (it == runs.end()) throw std::invalid_argument(fmt::format("unknown measurement '{}'", name));
      fmt::print(stderr, "redsync_bench: {} ...\n", name);
      out.object(name, it->second(cfg));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "redsync_bench: {}\n", e.what());
    return 1;
  }
  fmt::print("{}\n", out.str());
  return 0;
}
