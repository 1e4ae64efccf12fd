// Soak: the samples, the bounds they are held to, and the report (a summary
// line on stdout, and the samples over time as JSON).
#pragma once

#include "resources.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace redsync::soak {

// ---- bounds -----------------------------------------------------------------
// Each resource is measured twice in the same state: at the baseline (after
// the warm-up, the first 10% of the cycles) and at the end, both with every
// locker idle, every node healed, every connection re-established and the
// library's background work (release retries, the listener's maintenance
// timer) over (cycle_gate, settler, quiesce in soak.cpp). What the bounds
// allow comes from runs on the 2-core development machine (100 000 cycles,
// and 300 000 to tell growth per cycle from one-off growth):
//
//   open fds        22 -> 22, every run: exact.
//   libuv handles   timers, TCP, async and prepare handles exact; idle
//                   handles +2 to +4: a node pool creates one the first time
//                   it fails a call fast during reconnect backoff
//                   (node_pool::ensure_idle) and keeps it, so at most one per
//                   node (5) appears after the baseline.
//   RSS             +0.6 MiB after 90 000 cycles, and after 270 000 too: the
//                   allocator settling, not growth per cycle.
//   heap in use     +16 KiB after 90 000 cycles, and after 270 000 too (the
//                   soak's own samples, and lazily made state).
//
// Each bound still fails on a leak of one thing per cycle, 90 000 times over:
// one fd or one handle (bounds 8 over the baseline), 1 KiB (RSS: 88 MiB), and
// one allocation of any size (the heap: every malloc block takes at least
// 32 bytes, 2.7 MiB in all). A shorter run (--cycles) has the same bounds,
// so it catches only larger leaks. Checked by leaking, per cycle, in a copy
// of the soak: 1 KiB (RSS 15.3 -> 105.0 MiB, heap 10.9 -> 100.2 MiB: both
// failed), 24 bytes (heap 1.3 -> 4.2 MiB: failed; RSS +3.4 MiB passed), one
// fd (dup: failed at the fd limit) and, on the loop thread, one uv_timer_t
// (handles 4272 -> 43459: failed, as did the post-destruction checks).

/// Open fds may end at most this many above the baseline.
constexpr int fd_slack = 8;
/// libuv handles (all types together) may end at most this many above the
/// baseline: the 5 lazily created idle handles, and 3 to spare.
constexpr int handle_slack = 8;
/// RSS may end at most this far above the baseline: over 10x the growth seen.
constexpr std::size_t rss_slack = std::size_t{8} << 20;
/// The heap in use may end at most this far above the baseline: 60x the
/// growth seen, and under half of what one leaked allocation per cycle adds.
constexpr std::size_t heap_slack = std::size_t{1} << 20;
/// The share of cycles (lock and unlock both succeeded) a run must reach.
/// One fault at a time leaves a quorum of nodes that answer, so a cycle
/// fails only when its call runs out of tries or time: no cycle failed in
/// 500 000 measured. 1% to spare is for a loaded CI machine; failover that
/// stops working (a lock that does not get past a dead or frozen node) fails
/// far more than 1% of the cycles in a run with about 60 faults.
constexpr double min_success = 0.99;

struct sample {
  std::uint64_t cycle = 0;  ///< cycles handed out when it was taken
  std::string phase;        ///< "run", "baseline" or "final"
  double seconds = 0;       ///< since the soak's Redsync was made
  fd_counts fds;
  handle_counts handles;
  std::size_t rss = 0;       ///< bytes
  std::size_t heap = 0;      ///< bytes allocated and not freed (heap_in_use)
  std::uint64_t ok = 0;      ///< successful cycles so far
  std::uint64_t failed = 0;  ///< failed lock or unlock calls so far
};

/// One resource's verdict.
struct bound_check {
  std::string resource;
  long long baseline = 0;
  long long final_value = 0;
  long long bound = 0;
  bool ok() const { return final_value <= bound; }
};

struct run_report {
  std::uint64_t cycles = 0;
  double seconds = 0;
  int expected_connections = 0;
  std::uint64_t ok = 0;
  std::map<int, std::uint64_t> lock_failed;    ///< by errc value
  std::map<int, std::uint64_t> unlock_failed;  ///< by errc value
  /// Attempts beyond the first, over every lock call.
  std::uint64_t retries = 0;
  /// Node answers other than ok in the calls' results, by node_status name.
  std::map<std::string, std::uint64_t> node_answers;
  std::map<std::string, int> faults;
  std::vector<std::string> fault_errors;
  std::vector<sample> samples;
  std::optional<sample> baseline;
  std::optional<sample> final;
  int handles_after_destruction = -1;
  /// Anything that fails the run besides the bounds.
  std::vector<std::string> problems;
  /// Filled by evaluate().
  std::vector<bound_check> checks;

  void add(sample s) { samples.push_back(std::move(s)); }
  /// Holds the final sample to the bounds, and the successes to min_success.
  void evaluate();
  bool passed() const;
  /// One line (plus one line per failed check or problem).
  std::string summary() const;
  /// Throws std::runtime_error when the file cannot be written.
  void write_json(const std::string& path) const;
};

}  // namespace redsync::soak
