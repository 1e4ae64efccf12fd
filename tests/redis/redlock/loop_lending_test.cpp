// Blocking calls run the library's loop on the caller's thread when nobody
// else runs it (redsync_options::callers_run_loop, lib/transport/loop_owner.hpp),
// against real servers: which thread the callbacks run on, other threads'
// async calls served while a caller waits, and the opt-out.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

// The threads the acquisition events ran on, in order.
struct thread_log : redsync::observer {
  std::mutex mu;
  std::vector<std::thread::id> acquisitions;
  void on_acquire(const redsync::acquire_event&) override {
    std::lock_guard lk(mu);
    acquisitions.push_back(std::this_thread::get_id());
  }
  std::vector<std::thread::id> seen() {
    std::lock_guard lk(mu);
    return acquisitions;
  }
};

redsync::redsync_options observed(std::shared_ptr<thread_log> log, bool callers_run_loop) {
  auto o = fresh_nodes();
  o.observer = std::move(log);
  o.callers_run_loop = callers_run_loop;
  return o;
}

// The threads that ran the acquisition events of `cycles` blocking lock +
// unlock cycles made from this thread.
std::vector<std::thread::id> threads_of_cycles(cluster& c, bool callers_run_loop, int cycles) {
  auto log = std::make_shared<thread_log>();
  redsync::Redsync rs(c.uris(), observed(log, callers_run_loop));
  auto m = rs.new_mutex(unique_name("lending"));
  for (int i = 0; i < cycles; ++i) {
    REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
    REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());
  }
  auto seen = log->seen();
  REQUIRE(seen.size() == static_cast<std::size_t>(cycles));
  return seen;
}

}  // namespace

TEST_SUITE("loop lending") {
  TEST_CASE("blocking calls run the loop on the caller's thread: their observer events run there") {
    cluster c(3);
    const auto seen = threads_of_cycles(c, true, 24);
    const auto me = std::this_thread::get_id();
    int here = 0;
    // The first calls may still find the library's thread asleep inside the
    // loop (it starts lending once callers ask for the loop). Later ones
    // borrow it unless the library's thread is in a turn of its own just
    // then; on two loaded cores (other test processes, compilers) that was
    // half of them at times, so the bound is a quarter of 16 calls.
    for (std::size_t i = 8; i < seen.size(); ++i) here += seen[i] == me ? 1 : 0;
    // Without lending, none of them would be: the loop thread ran them all.
    CHECK_MESSAGE(here >= 4, here, " of the last 16 acquisitions ran on the caller's thread");
    // And only two threads ever ran the loop: this one and the library's.
    CHECK(std::set<std::thread::id>(seen.begin(), seen.end()).size() <= 2);
  }

  TEST_CASE("with callers_run_loop = false no callback runs on a caller's thread") {
    cluster c(3);
    const auto seen = threads_of_cycles(c, false, 8);
    const auto me = std::this_thread::get_id();
    for (const auto& t : seen) CHECK(t != me);
    CHECK(std::set<std::thread::id>(seen.begin(), seen.end()).size() == 1);
  }

  TEST_CASE("a thread waiting in a blocking lock keeps serving other threads' async calls") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto busy = unique_name("busy");
    auto holder = rs.new_mutex(busy);
    REQUIRE(holder.lock(redsync::context::timeout(5s)).ok());
    // Warm up so that the waiter below borrows the loop rather than posting.
    auto warm = rs.new_mutex(unique_name("warm"));
    REQUIRE(warm.lock(redsync::context::timeout(5s)).ok());
    REQUIRE(warm.unlock(redsync::context::timeout(5s)).ok());

    std::atomic<bool> waiter_got{false};
    std::thread::id waiter_id;
    std::thread waiter([&] {
      waiter_id = std::this_thread::get_id();
      auto m = rs.new_mutex(busy, {.tries = redsync::unlimited_tries, .retry_delay = 20ms});
      waiter_got = m.lock(redsync::context::timeout(10s)).ok();
      if (waiter_got) (void)m.unlock(redsync::context::timeout(5s));
    });
    std::this_thread::sleep_for(200ms);  // the waiter is inside lock(), retrying

    // Async calls from this thread complete while the waiter waits; none of
    // their callbacks runs here (this thread is in no call of the Redsync).
    const auto me = std::this_thread::get_id();
    std::atomic<int> on_me{0};
    for (int i = 0; i < 10; ++i) {
      auto other = rs.new_mutex(unique_name("async"));
      std::promise<bool> done;
      other.lock_async(redsync::context::timeout(5s), [&](redsync::result r) {
        if (std::this_thread::get_id() == me) ++on_me;
        if (!r.ok()) return done.set_value(false);
        other.unlock_async(redsync::context::timeout(5s), [&](redsync::result u) {
          if (std::this_thread::get_id() == me) ++on_me;
          done.set_value(u.ok());
        });
      });
      auto f = done.get_future();
      REQUIRE(f.wait_for(5s) == std::future_status::ready);
      CHECK(f.get());
    }
    CHECK(on_me == 0);
    CHECK_FALSE(waiter_got);

    REQUIRE(holder.unlock(redsync::context::timeout(5s)).ok());
    waiter.join();
    CHECK(waiter_got);
  }
}
