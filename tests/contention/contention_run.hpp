// Runs N contender processes (contender.cpp) on one lock name and measures
// what they saw: the contention test (contention_test.cpp) asserts generous
// bounds on these figures, the bench's contention section
// (bench/contention.cpp) reports them. Shared by both, so the test and the
// benchmark can never measure two different things.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace redsync::contention {

struct run_settings {
  /// The contender program.
  std::string program;
  std::vector<std::string> nodes;
  /// The shared lock name.
  std::string name;
  int processes = 4;
  /// Acquisitions per process; 0 = cycles until `window` has passed.
  int cycles = 0;
  /// Bench mode (cycles == 0): the measured window.
  std::chrono::milliseconds window{0};
  /// Cycles mode: no lock call starts after this (from the start); what is
  /// not done by then is reported incomplete.
  std::chrono::milliseconds give_up{20'000};
  /// Each lock call's deadline.
  std::chrono::milliseconds call_deadline{10'000};
  /// Time inside the critical section beyond reading and writing the counter.
  std::chrono::microseconds hold{0};
  /// Retry delay uniform in [1, 3] ms; false = the library's default.
  bool short_retry = false;
  std::chrono::milliseconds expiry{8'000};
  /// The restart guard (on by default in the library, as users run it).
  bool restart_guard = true;
  /// Every process must be connected and ready within this.
  std::chrono::milliseconds startup_bound{60'000};
};

/// One acquisition, times in ns of the steady clock (shared by all processes).
struct grant {
  int process = 0;
  std::int64_t want = 0;      ///< the first lock call for it began
  std::int64_t acquired = 0;  ///< lock returned
  std::int64_t released = 0;  ///< the critical section ended (unlock called)
};

struct failure {
  int process = 0;
  std::string error;
  std::int64_t elapsed_ns = 0;
  std::string detail;
};

/// What the processes reported.
struct run_outcome {
  std::vector<grant> grants;  ///< sorted by `acquired`
  std::vector<failure> failures;
  /// Waits cut by the end of the window (bench) or the give-up time (test): ns.
  std::vector<std::int64_t> unfinished_waits;
  std::vector<std::int64_t> unfinished_since;  ///< when each of those began
  std::vector<int> acquisitions;               ///< per process
  std::vector<bool> completed;                 ///< per process: made all its cycles
  /// A process that crashed, exited non-zero, or left no report.
  std::vector<std::string> problems;
  std::int64_t start = 0;
  std::int64_t end = 0;  ///< the window's end, or when the last process ended
  /// Cycles mode: when the first process made its last acquisition (the
  /// fairness window ends there); bench mode: the window's end.
  std::int64_t fairness_end = 0;
  long counter = 0;  ///< the shared counter's final value
};

/// Runs the processes. `on_progress(counter)` is called every few ms while
/// they run (e.g. to kill a node halfway). Throws std::runtime_error when a
/// process cannot be started or never gets ready.
run_outcome run(const run_settings& s, const std::function<void(long counter)>& on_progress = {});

struct summary {
  std::size_t n = 0;
  double p50_us = 0, p99_us = 0, max_us = 0;
};

/// What a run shows.
struct figures {
  int processes = 0;
  std::int64_t acquisitions = 0;
  /// Acquisitions by another process than the previous holder.
  std::int64_t handovers = 0;
  double seconds = 0;
  double acquisitions_per_s = 0;
  double handovers_per_s = 0;
  /// From wanting the lock to getting it (across retried calls); max also
  /// counts unfinished waits.
  summary wait;
  /// From a release to the next holder's acquisition, when that holder differs.
  summary handover_wait;
  /// The longest time nobody held the lock while someone wanted it (ms).
  double longest_stall_ms = 0;
  /// Jain's index over the processes' acquisitions up to `fairness_end`:
  /// 1 = equal shares, 1/n = one process took everything.
  double jain = 0;
  int min_share = 0, max_share = 0;
  /// Grants that began before the previous one ended: mutual exclusion broken.
  int overlaps = 0;
  std::size_t failures = 0;
  int incomplete = 0;
};

figures measure(const run_outcome& o);

/// Fairness over the processes' acquisition counts (one entry per process,
/// 0 for a process that got none): Jain's index, sum^2 / (n * sum of
/// squares), 1 = equal shares, 1/n = one process took everything, 0 when
/// nobody got any; min_share and max_share, the fewest and most
/// acquisitions of one process. measure() and the bench's semaphore section
/// (bench/semaphore.cpp) both use it.
struct fairness {
  double jain = 0;
  int min_share = 0, max_share = 0;
};

fairness fairness_of(const std::vector<int>& acquisitions);

/// One line: "4 processes, 240 acquisitions (236 hand-overs, 412/s), wait p50 ...".
std::string describe(const figures& f);

}  // namespace redsync::contention
