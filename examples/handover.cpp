// Fast, fair hand-over: two workers take turns on one name, each holding it
// for 1 ms. A waiter is woken by the release (pub/sub) instead of sleeping
// out its retry delay, and the lock goes to the waiter, not back to the
// releaser. Prints how many hand-overs happened and how long waiters waited.
//
//   build/examples/handover [redis://127.0.0.1:7001 ...]
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "nodes.hpp"

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr std::string_view usage =
    "Usage: handover [--help] [URI...]\n\n"
    "Fast, fair hand-over: two workers take turns on one name; prints how many\nhand-overs happened and how "
    "long waiters waited.\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));
  constexpr int rounds = 200;
  std::mutex mu;
  std::vector<double> waits_ms;
  std::atomic<int> last_holder{-1};
  std::atomic<int> handovers{0};
  std::atomic<clock_type::rep> released_at{0};
  std::atomic<bool> failed{false};

  auto worker = [&](int id) {
    auto m = rs.new_mutex("example:handover", {.expiry = 2s, .tries = 1000});
    for (int i = 0; i < rounds && !failed; ++i) {
      if (auto r = m.lock(redsync::context::timeout(5s)); !r) {
        fmt::print(stderr, "worker {}: {}\n", id, r.describe());
        failed = true;
        return;
      }
      const auto now = clock_type::now();
      if (last_holder.exchange(id) != id && released_at.load() != 0) {
        ++handovers;
        std::lock_guard lk(mu);
        waits_ms.push_back(std::chrono::duration<double, std::milli>(
                               now - clock_type::time_point(clock_type::duration(released_at.load())))
                               .count());
      }
      std::this_thread::sleep_for(1ms);  // the critical section
      released_at = clock_type::now().time_since_epoch().count();
      (void)m.unlock(redsync::context{});
    }
  };
  const auto start = clock_type::now();
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  const double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  if (failed) return 1;
  std::sort(waits_ms.begin(), waits_ms.end());
  const double median = waits_ms.empty() ? 0 : waits_ms[waits_ms.size() / 2];
  const double worst = waits_ms.empty() ? 0 : waits_ms.back();
  fmt::print(
      "{} hand-overs in {:.2f} s ({:.0f}/s); wait from release to the other's hold: median {:.2f} ms, max "
      "{:.2f} ms\n",
      handovers.load(), secs, handovers.load() / secs, median, worst);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "handover: {}\n", e.what());
  return 1;
}
