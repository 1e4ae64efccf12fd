// The soak: 100 000 lock/unlock cycles against 5 real redis-servers while a
// fault driver kills, freezes and disrupts one node at a time. Open fds,
// libuv handles (counted by uv_walk on the loop thread of an
// application-owned loop), RSS, the heap in use and the live connections are
// sampled every 2% of the cycles; after the warm-up (the first 10%) a
// baseline is taken, and the run fails if, once every node is healed and
// every connection is back, any of them ends above its bound (report.hpp
// states each bound and why), if the connections are not all back, if the
// Redsync leaves a handle on the loop, or if fewer than `min_success` of the
// cycles succeeded.
//
//   soak [--cycles N] [--json PATH]
//
// Prints one summary line (and one line per failure); --json writes the
// samples over time and the verdicts.

#include "cycles.hpp"
#include "faults.hpp"
#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_server.hpp"
#include "report.hpp"
#include "resources.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace redsync::soak {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

// ---- the workload -------------------------------------------------------------

constexpr std::size_t node_count = 5;
// Short, so that the restart guard keeps a restarted node out for well under
// a second (the guard window is the longest expiry).
constexpr auto expiry = 500ms;
// Per-node command timeout = expiry x timeout_factor = 50 ms: the short pause
// (25 ms) is below it, the long one (300 ms) far above.
constexpr double timeout_factor = 0.1;
constexpr fault_timing timing{.short_pause = 25ms, .long_pause = 300ms, .down = 100ms, .gap = 250ms};
// Blocking lockers: two per name, so that every name is contended (waiting
// line, wake-ups); odd ones use fail_fast.
constexpr int blocking_lockers = 6;
constexpr int blocking_names = 3;
// Each blocking locker replaces its Mutex this often (creation and
// destruction are part of what must not leak).
constexpr std::uint64_t renew_every = 500;
// Loop-thread lockers: chains of lock_async -> unlock_async -> next cycle,
// each on a name of its own.
constexpr int async_chains = 4;
constexpr auto call_bound = 3s;
// How long the handle count must hold still before the baseline and the
// final sample: longer than a release's retries (expiry + drift) and than the
// listener's maintenance interval (500 ms).
constexpr auto quiet_time = 2 * expiry + 200ms;
// Every connection the Redsync keeps: one pooled and one pub/sub per node.
constexpr int expected_connections = 2 * static_cast<int>(node_count);

mutex_options cycle_options(bool fail_fast) {
  return {.expiry = expiry,
          .tries = 64,
          .retry_delay = [](int) { return 2ms; },
          .timeout_factor = timeout_factor,
          .fail_fast = fail_fast};
}

// ---- outcomes -------------------------------------------------------------------

// Outcomes of the cycles, and what the faults did to the calls that still
// succeeded: attempts beyond the first, and the nodes that did not answer ok.
struct tally {
  std::atomic<std::uint64_t> ok{0};
  std::array<std::atomic<std::uint64_t>, 16> lock_failed{};
  std::array<std::atomic<std::uint64_t>, 16> unlock_failed{};
  std::atomic<std::uint64_t> retries{0};
  std::array<std::atomic<std::uint64_t>, 8> node_answers{};  // by node_status

  static std::size_t slot(const result& r) {
    const int v = r.error.value();
    return v > 0 && v < 16 ? static_cast<std::size_t>(v) : 0;
  }
  void count_nodes(const result& r) {
    for (const auto& n : r.nodes) {
      const auto i = static_cast<std::size_t>(n.status);
      if (i < node_answers.size()) ++node_answers[i];
    }
  }
  // Returns true when the lock was acquired (an unlock is due).
  bool locked(const result& r) {
    count_nodes(r);
    if (r.attempts > 1) retries += static_cast<std::uint64_t>(r.attempts - 1);
    if (r) return true;
    ++lock_failed[slot(r)];
    return false;
  }
  void unlocked(const result& r) {
    count_nodes(r);
    if (r) {
      ++ok;
    } else {
      ++unlock_failed[slot(r)];
    }
  }
  std::uint64_t failed() const {
    std::uint64_t n = 0;
    for (auto& c : lock_failed) n += c.load();
    for (auto& c : unlock_failed) n += c.load();
    return n;
  }
};

// ---- the lockers ----------------------------------------------------------------

void blocking_locker(Redsync& rs, cycle_gate& gate, tally& t, const std::string& name, bool fail_fast) {
  auto m = rs.new_mutex(name, cycle_options(fail_fast));
  std::uint64_t index = 0;
  std::uint64_t mine = 0;
  while (gate.claim(index)) {
    if (++mine % renew_every == 0) m = rs.new_mutex(name, cycle_options(fail_fast));
    if (t.locked(m.lock(context::timeout(call_bound)))) t.unlocked(m.unlock(context::timeout(call_bound)));
    gate.finish();
  }
}

// Lives until every cycle has ended and the loop has been through one more
// iteration (the coordinator walks it), so no callback still runs on it.
class async_chain {
 public:
  async_chain(Redsync& rs, cycle_gate& gate, tally& t, const std::string& name)
      : gate_(gate), tally_(t), mutex_(rs.new_mutex(name, cycle_options(false))) {}

  // Any thread, or the loop thread from this chain's own callbacks.
  void next() {
    std::uint64_t index = 0;
    if (gate_.try_claim(index, [this] { next(); }) != cycle_gate::claimed::yes) return;
    mutex_.lock_async(context::timeout(call_bound), [this](result r) {
      if (!tally_.locked(r)) return end_cycle();
      mutex_.unlock_async(context::timeout(call_bound), [this](result u) {
        tally_.unlocked(u);
        end_cycle();
      });
    });
  }

 private:
  void end_cycle() {
    gate_.finish();
    next();
  }

  cycle_gate& gate_;
  tally& tally_;
  Mutex mutex_;
};

// ---- settling -----------------------------------------------------------------

// Brings every connection back after faults: one hand-over between two
// mutexes of the same name uses every node's pooled connection, and the
// waiter's wait opens every node's pub/sub connection. Bounded by `bound`.
class settler {
 public:
  explicit settler(Redsync& rs)
      : holder_(rs.new_mutex(test::unique_name("soak:settle"), settle_options())),
        waiter_(rs.new_mutex(holder_.name(), settle_options())) {}

  bool run(loop_thread& loop, std::chrono::milliseconds bound) {
    const auto deadline = clock::now() + bound;
    auto all_up = [&] {
      auto h = loop.count_handles(1s);
      return h && h->connections >= expected_connections;
    };
    while (clock::now() < deadline) {
      if (holder_.lock(context::timeout(2s))) {
        auto waited = waiter_.lock_future(context::timeout(2s));
        test::wait_until(all_up, 1s);
        (void)holder_.unlock(context::timeout(2s));
        if (waited.get()) (void)waiter_.unlock(context::timeout(2s));
      }
      if (all_up()) return true;
    }
    return false;
  }

 private:
  // Patient: the first run waits out the restart guard window of the nodes
  // that prime_records() stamped moments before.
  static mutex_options settle_options() {
    return {.expiry = expiry, .tries = 200, .retry_delay = [](int) { return 10ms; }, .timeout_factor = 0.1};
  }
  Mutex holder_;
  Mutex waiter_;
};

// Waits until the library's background work has ended: releases are retried
// for at most expiry + drift after they were first sent, and the pub/sub
// listener's maintenance timer closes on its first tick (every 500 ms) with
// nobody waiting. The handle count then holds still; it is polled until it
// has not changed for `still` (bounded). Both the baseline and the final
// sample are taken in this state, so they compare like with like.
bool quiesce(loop_thread& loop, std::chrono::milliseconds still, std::chrono::milliseconds bound) {
  const auto deadline = clock::now() + bound;
  int last = -1;
  auto since = clock::now();
  while (clock::now() < deadline) {
    auto h = loop.count_handles(1s);
    if (!h) return false;
    if (h->total != last) {
      last = h->total;
      since = clock::now();
    } else if (clock::now() - since >= still) {
      return true;
    }
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

sample take_sample(loop_thread& loop, std::uint64_t cycle, clock::time_point start, const tally& t,
                   std::string_view phase, run_report& report) {
  sample s;
  s.cycle = cycle;
  s.phase = std::string(phase);
  s.seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (auto handles = loop.count_handles(5s)) {
    s.handles = std::move(*handles);
  } else {
    report.problems.push_back(
        fmt::format("at cycle {}, the libuv loop did not count its handles within 5 s", cycle));
  }
  try {
    s.fds = open_fds();
    s.rss = rss_bytes();
    s.heap = heap_in_use();
  } catch (const std::exception& e) {
    // Reported, not thrown: the lockers are still running.
    report.problems.push_back(fmt::format("at cycle {}: {}", cycle, e.what()));
  }
  s.ok = t.ok.load();
  s.failed = t.failed();
  return s;
}

struct arguments {
  std::uint64_t cycles = 100000;
  std::string json;
};

arguments parse(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if ((arg == "--cycles" || arg == "--json") && i + 1 < argc) {
      if (arg == "--cycles") {
        a.cycles = std::strtoull(argv[++i], nullptr, 10);
      } else {
        a.json = argv[++i];
      }
    } else {
      std::fputs("usage: soak [--cycles N (>= 50, default 100000)] [--json PATH]\n", stderr);
      std::exit(64);
    }
  }
  if (a.cycles < 50) {
    std::fputs("soak: --cycles must be at least 50\n", stderr);
    std::exit(64);
  }
  return a;
}

int run(const arguments& args) {
  run_report report;
  report.cycles = args.cycles;
  report.expected_connections = expected_connections;
  const std::uint64_t warmup = args.cycles / 10;
  const std::uint64_t sample_every = args.cycles / 50;

  test::cluster nodes(node_count);
  test::prime_records(nodes.uris());
  loop_thread loop;
  const auto start = clock::now();
  {
    Redsync rs(nodes.uris(), redsync_options{.loop = loop.loop()});
    loop.start();
    settler settle(rs);
    if (!settle.run(loop, 10s)) throw std::runtime_error("the first hand-over did not open every connection");

    cycle_gate gate(args.cycles, warmup, sample_every);
    tally t;
    fault_driver faults(nodes, timing);
    std::vector<std::string> names;
    for (int i = 0; i < blocking_names + async_chains; ++i) names.push_back(test::unique_name("soak"));

    std::vector<std::unique_ptr<async_chain>> chains;
    for (int i = 0; i < async_chains; ++i) {
      chains.push_back(std::make_unique<async_chain>(rs, gate, t, names[blocking_names + i]));
    }
    std::vector<std::thread> lockers;
    for (int i = 0; i < blocking_lockers; ++i) {
      lockers.emplace_back(blocking_locker, std::ref(rs), std::ref(gate), std::ref(t),
                           std::cref(names[i % blocking_names]), i % 2 == 1);
    }
    for (auto& c : chains) c->next();

    auto next_fault = clock::now() + timing.gap;
    for (;;) {
      auto e = gate.wait(next_fault);
      for (auto i : e.samples) report.add(take_sample(loop, i, start, t, "run", report));
      if (e.baseline_due) {
        // Every locker stops at the closed gate; no fault is under way.
        faults.heal();
        gate.wait_quiet();
        if (!settle.run(loop, 10s))
          report.problems.push_back("connections did not come back after the warm-up");
        if (!quiesce(loop, quiet_time, 10s))
          report.problems.push_back("the loop did not quiesce after the warm-up");
        report.baseline = take_sample(loop, warmup, start, t, "baseline", report);
        report.add(*report.baseline);
        gate.open();
      }
      if (e.all_done) break;
      if (clock::now() >= next_fault) next_fault = faults.step();
    }
    faults.heal();
    for (auto& th : lockers) th.join();

    // Every node is back; reconnect everything, then measure.
    if (!settle.run(loop, 10s)) report.problems.push_back("connections did not come back after healing");
    if (!quiesce(loop, quiet_time, 10s)) report.problems.push_back("the loop did not quiesce after healing");
    report.final = take_sample(loop, args.cycles, start, t, "final", report);
    report.add(*report.final);
    report.seconds = report.final->seconds;
    report.ok = t.ok.load();
    for (std::size_t i = 0; i < t.lock_failed.size(); ++i) {
      if (auto n = t.lock_failed[i].load()) report.lock_failed[static_cast<int>(i)] = n;
      if (auto n = t.unlock_failed[i].load()) report.unlock_failed[static_cast<int>(i)] = n;
    }
    report.retries = t.retries.load();
    for (std::size_t i = 0; i < t.node_answers.size(); ++i) {
      const auto st = static_cast<node_status>(i);
      if (st == node_status::ok) continue;
      if (auto n = t.node_answers[i].load()) report.node_answers[std::string(to_string(st))] = n;
    }
    report.faults = faults.started();
    report.fault_errors = faults.errors();
  }
  // The Redsync is gone: only the soak's own two handles may be left.
  if (auto after = loop.count_handles(5s); !after) {
    report.problems.push_back("the libuv loop did not answer after the Redsync was destroyed");
  } else {
    report.handles_after_destruction = after->total;
    if (after->total != 2) {
      report.problems.push_back(
          fmt::format("{} libuv handles left on the loop after the Redsync was destroyed (the soak's own: 2)",
                      after->total));
    }
  }
  if (std::string why; !loop.stop(10s, why)) report.problems.push_back(why);

  report.evaluate();
  std::puts(report.summary().c_str());
  if (!args.json.empty()) report.write_json(args.json);
  return report.passed() ? 0 : 1;
}

}  // namespace
}  // namespace redsync::soak

int main(int argc, char** argv) {
  // Writing to a killed or paused server must be an error return, not a
  // process-killing signal.
  std::signal(SIGPIPE, SIG_IGN);
  const auto args = redsync::soak::parse(argc, argv);
  int rc = 1;
  try {
    rc = redsync::soak::run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak: FAIL: %s\n", e.what());
  }
  redsync::test::kill_all_servers();
  return rc;
}
