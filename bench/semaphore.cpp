// Semaphore contention: C processes (tests/contention/sem_contender.cpp, one
// Redsync each, the library's default retry delay) acquire permits of one
// counting semaphore of k permits again and again for a fixed window,
// holding each about 1 ms, for k = 1, 4 and 16 (scripts/bench: 64
// processes). Reported per k: acquisitions/s, the wait (from the acquire
// call to its return) p50/p90/p99/max over the acquisitions of the window,
// waits the window's end cut (and the longest), the most holders seen
// at once (must be <= k), and the fairness of the permits between the
// processes: each grant line carries its process's pid, the acquisitions of
// the window are counted per process (a process that got none counts 0),
// and Jain's index, min_share and max_share are those of the contention
// section (fairness_of, tests/contention/contention_run.hpp), with
// jain_met = Jain >= jain_goal (0.95, issue 36 (c)).

#include "bench.hpp"

#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "contention_run.hpp"
#include "holders.hpp"

namespace bench {

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

pid_t spawn(const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

struct interval {
  std::int64_t enter = 0, leave = 0;
};

// Issue 36 (c): the permits shared fairly between the processes.
constexpr double jain_goal = 0.95;

json run_point(const config& cfg, const std::string& program, int permits, int processes) {
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("redsync-bench-semaphore-{}-{}", ::getpid(), permits);
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "grants.txt").string();
  std::string nodes;
  for (const auto& n : cfg.nodes) nodes += (nodes.empty() ? "" : ",") + n;
  // Every process must have started (and connected, on its first call)
  // before the window: 40 ms per process on 2 loaded cores, at least 1 s.
  const std::int64_t start = now_ns() + std::max<std::int64_t>(1'000'000'000, processes * 40'000'000LL);
  const std::int64_t end = start + std::chrono::nanoseconds(cfg.duration).count();
  const std::string name = unique_name("semaphore");
  std::vector<pid_t> pids;
  for (int p = 0; p < processes; ++p)
    pids.push_back(
        spawn({program, "--nodes", nodes, "--name", name, "--permits", std::to_string(permits), "--cycles",
               "0", "--out", out, "--start-ns", std::to_string(start), "--end-ns", std::to_string(end)}));
  int failed_processes = 0;
  for (const pid_t pid : pids) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ++failed_processes;
  }
  samples wait;
  std::vector<interval> held;
  std::int64_t cut = 0, longest_cut_ns = 0, acquisitions = 0;
  // The window's acquisitions per process; every process counts, with 0 if
  // it got none.
  std::map<pid_t, int> per_process;
  for (const pid_t pid : pids) per_process[pid] = 0;
  std::string first_failure;
  std::ifstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "grant") {
      std::uint32_t slot = 0;
      std::uint64_t token = 0;
      interval h;
      std::int64_t want = 0;
      pid_t pid = 0;
      words >> slot >> token >> h.enter >> h.leave >> want >> pid;
      const auto process = per_process.find(pid);
      if (!words || process == per_process.end()) {
        if (first_failure.empty()) first_failure = "unreadable: " + line;
        continue;
      }
      held.push_back(h);
      // The window's acquisitions: those that returned inside it.
      if (h.enter >= start && h.enter <= end) {
        ++acquisitions;
        ++process->second;
        wait.add(std::chrono::nanoseconds(h.enter - std::max(want, start)));
      }
    } else if (kind == "cut") {
      std::int64_t want = 0;
      words >> want;
      ++cut;
      longest_cut_ns = std::max(longest_cut_ns, end - std::max(want, start));
    } else if (first_failure.empty()) {
      first_failure = line;
    }
  }
  std::filesystem::remove_all(dir);
  const double seconds = static_cast<double>(end - start) / 1e9;
  const std::size_t most = redsync::contention::most_at_once(held);
  std::vector<int> shares;
  for (const auto& [pid, count] : per_process) shares.push_back(count);
  const auto fair = redsync::contention::fairness_of(shares);
  json w;
  w.integer("n", static_cast<std::int64_t>(wait.size()))
      .num("p50_us", wait.percentile(0.5))
      .num("p90_us", wait.percentile(0.9))
      .num("p99_us", wait.percentile(0.99))
      .num("max_us", wait.max());
  json j;
  j.integer("permits", permits)
      .integer("contenders", processes)
      .integer("acquisitions", acquisitions)
      .num("acquisitions_per_s", static_cast<double>(acquisitions) / seconds)
      .object("wait", w)
      .integer("cut_waits", cut)
      .num("longest_cut_wait_us", static_cast<double>(longest_cut_ns) / 1000.0)
      .integer("most_holders_at_once", static_cast<std::int64_t>(most))
      .flag("at_most_k", most <= static_cast<std::size_t>(permits))
      .num("jain", fair.jain)
      .integer("min_share", fair.min_share)
      .integer("max_share", fair.max_share)
      .num("jain_goal", jain_goal)
      .flag("jain_met", fair.jain >= jain_goal)
      .integer("failed_processes", failed_processes)
      .text("first_failure", first_failure)
      .num("seconds", seconds);
  return j;
}

}  // namespace

json run_semaphore(const config& cfg) {
  const std::string program = program_next_to_self("redsync_sem_contender");
  std::vector<json> points;
  for (const int k : cfg.semaphore_permits) {
    fmt::print(stderr, "redsync_bench: semaphore: k = {}, {} processes\n", k, cfg.semaphore_contenders);
    points.push_back(run_point(cfg, program, k, cfg.semaphore_contenders));
  }
  json j;
  j.text("processes",
         "one per contender (redsync_sem_contender), library default retry delay, expiry 8 s, hold ~1 ms")
      .integer("window_ms", cfg.duration.count())
      .array("points", points);
  return j;
}

}  // namespace bench
