// Hand-over: C contenders on one name, each a thread with its own Mutex and
// the blocking API, each holding the lock for 1 ms per acquisition, for a
// fixed window. A hand-over is an acquisition by another contender than the
// previous holder (a holder that wins again right after its own unlock is
// counted as a re-acquisition, not a hand-over). Measured: hand-overs per
// second; their wait, from the moment the previous holder called unlock to
// the moment the next holder's lock returned; each
// lock call's latency (a contender's view, including starvation); and SET
// attempts per hand-over, both as the library counts them
// (result.attempts) and as node 1 counts them (INFO commandstats).
// Run with the default retry delay and with a fixed 10 ms one.

#include "bench.hpp"
#include "transport.hpp"

#include <redsync/redsync.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;

struct shared_log {
  std::mutex mu;
  std::optional<clock::time_point> released_at;  // when the last holder called unlock
  int last_holder = -1;
  samples waits;
  samples lock_calls;
  std::int64_t acquisitions = 0;
  std::int64_t handovers = 0;
  std::int64_t attempts = 0;
  std::int64_t failed_locks = 0;  // gave up after `tries` (not counting the end of the window)
};

std::int64_t commandstat_calls(transport& admin, std::string_view cmd) {
  // cmdstat_set:calls=123,usec=...
  const auto v = admin.info_field(0, "commandstats", fmt::format("cmdstat_{}", cmd));
  const auto eq = v.find("calls=");
  if (eq == std::string::npos) return 0;
  return std::stoll(v.substr(eq + 6, v.find(',', eq) - eq - 6));
}

json run_point(const config& cfg, transport& admin, int contenders, bool tuned) {
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  const std::string name = unique_name("handover");
  redsync::mutex_options opts;
  if (tuned) opts.retry_delay = [](int) { return std::chrono::milliseconds{10}; };

  shared_log log;
  admin.command(0, {"CONFIG", "RESETSTAT"});
  const auto start = clock::now();
  const auto end = start + cfg.duration;
  std::vector<std::thread> threads;
  for (int c = 0; c < contenders; ++c) {
    threads.emplace_back([&, c, m = rs.new_mutex(name, opts)]() mutable {
      while (clock::now() < end) {
        const auto t0 = clock::now();
        const auto r = m.lock(redsync::context::until(end));
        const auto now = clock::now();
        std::unique_lock lk(log.mu);
        log.attempts += r.attempts;
        if (!r) {
          if (r.error != redsync::errc::deadline_exceeded) ++log.failed_locks;
          continue;
        }
        log.lock_calls.add(now - t0);
        if (log.last_holder >= 0 && log.last_holder != c) {
          ++log.handovers;
          if (log.released_at) log.waits.add(now - *log.released_at);
        }
        log.last_holder = c;
        log.released_at.reset();
        ++log.acquisitions;
        lk.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
        lk.lock();
        log.released_at = clock::now();
        lk.unlock();
        m.unlock(redsync::context{});
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(clock::now() - start).count();
  const auto sets = commandstat_calls(admin, "set");
  const std::int64_t handovers = std::max<std::int64_t>(log.handovers, 1);

  json j;
  j.integer("contenders", contenders)
      .text("retry_delay", tuned ? "10ms" : "default [50,250) ms")
      .integer("acquisitions", log.acquisitions)
      .integer("handovers", log.handovers)
      .num("acquisitions_per_s", static_cast<double>(log.acquisitions) / secs)
      .num("handovers_per_s", static_cast<double>(log.handovers) / secs)
      .object("wait", log.waits.summary())
      .object("lock_call", log.lock_calls.summary())
      .num("attempts_per_handover", static_cast<double>(log.attempts) / static_cast<double>(handovers))
      .num("node1_sets_per_handover", static_cast<double>(sets) / static_cast<double>(handovers))
      .integer("failed_locks", log.failed_locks)
      .num("seconds", secs);
  return j;
}

}  // namespace

json run_handover(const config& cfg) {
  transport admin(cfg.nodes);
  std::vector<json> points;
  for (const bool tuned : {false, true}) {
    for (const int c : cfg.contenders) points.push_back(run_point(cfg, admin, c, tuned));
  }
  json j;
  j.array("points", points);
  return j;
}

}  // namespace bench
