// Contention (issue 21): C contender processes, each with its own Redsync
// and the library's defaults (restart guard on), take one name again and
// again for a fixed window, holding it ~0 (read and write a counter file) or
// 1 ms, with the default retry delay and with a uniform 1-3 ms one (what
// users pick). The processes are tests/contention/contender.cpp, driven by
// tests/contention/contention_run.cpp, which the contention test uses too.
//
// Reported per point: hand-overs/s (an acquisition by another process than
// the previous holder), acquisitions/s, the wait (from wanting the lock to
// getting it, across retried calls; the max also counts waits the window's
// end cut), the hand-over wait (release to the next holder's acquisition),
// the longest stall (the lock free while someone wanted it), Jain's index
// over the processes' acquisitions in the window, failed calls, and the
// counter check (mutual exclusion).

#include "bench.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <climits>
#include <filesystem>
#include <stdexcept>

#include "contention_run.hpp"

namespace bench {

namespace {

std::string contender_program(const config& cfg) {
  if (!cfg.contender.empty()) return cfg.contender;
  return program_next_to_self("redsync_contender");
}

json summary_json(const redsync::contention::summary& s) {
  json j;
  j.integer("n", static_cast<std::int64_t>(s.n))
      .num("median_us", s.p50_us)
      .num("p99_us", s.p99_us)
      .num("max_us", s.max_us);
  return j;
}

}  // namespace

json run_contention(const config& cfg) {
  const std::string program = contender_program(cfg);
  std::vector<json> points;
  for (const bool short_retry : {false, true}) {
    for (const int hold_us : {0, 1000}) {
      for (const int c : cfg.contention) {
        redsync::contention::run_settings s;
        s.program = program;
        s.nodes = cfg.nodes;
        s.name = unique_name("contention");
        s.processes = c;
        s.window = cfg.duration;
        s.hold = std::chrono::microseconds(hold_us);
        s.short_retry = short_retry;
        fmt::print(stderr, "redsync_bench: contention: {} processes, hold {} us, retry {}\n", c, hold_us,
                   short_retry ? "1-3 ms" : "default");
        const auto o = redsync::contention::run(s);
        const auto f = redsync::contention::measure(o);
        std::string problems;
        for (const auto& p : o.problems) problems += p + "; ";
        std::string first_failure;
        if (!o.failures.empty()) first_failure = o.failures.front().error + ":" + o.failures.front().detail;
        json j;
        j.integer("contenders", c)
            .integer("hold_us", hold_us)
            .text("retry_delay", short_retry ? "1-3ms" : "default")
            .integer("acquisitions", f.acquisitions)
            .integer("handovers", f.handovers)
            .num("acquisitions_per_s", f.acquisitions_per_s)
            .num("handovers_per_s", f.handovers_per_s)
            .object("wait", summary_json(f.wait))
            .object("handover_wait", summary_json(f.handover_wait))
            .num("longest_stall_ms", f.longest_stall_ms)
            .num("jain", f.jain)
            .integer("min_share", f.min_share)
            .integer("max_share", f.max_share)
            .integer("failed_calls", static_cast<std::int64_t>(f.failures))
            .text("first_failure", first_failure)
            .integer("unfinished_waits", static_cast<std::int64_t>(o.unfinished_waits.size()))
            .integer("overlaps", f.overlaps)
            .flag("counter_ok", o.counter == f.acquisitions)
            .text("problems", problems)
            .num("seconds", f.seconds);
        points.push_back(j);
      }
    }
  }
  json j;
  j.text("processes", "one per contender (redsync_contender), library defaults, restart guard on")
      .integer("window_ms", cfg.duration.count())
      .array("points", points);
  return j;
}

}  // namespace bench
