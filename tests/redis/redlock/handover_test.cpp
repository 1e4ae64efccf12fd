// Hand-over: waiters are woken by the release instead of sleeping, served in
// arrival order, and the releaser cannot jump the line.

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// Waiters in the line on node 0.
long long waiting(cluster& c, const std::string& name) {
  return redis_client(c[0]).command({"ZCARD", name + ":redsync-line"}).integer;
}

// Waiters subscribed to the lock's releases (each on its own channel,
// redsync:release:NAME:SHA1), on every node (the minimum).
long long subscribers(cluster& c, const std::string& name) {
  long long least = -1;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const long long n = waiter_channels(c[i], "redsync:release:" + name);
    least = least < 0 ? n : std::min(least, n);
  }
  return least;
}

redsync::mutex_options slow_retries() {
  return {.tries = 1000, .retry_delay = [](int) { return 5000ms; }};
}

}  // namespace

TEST_SUITE("handover") {
  TEST_CASE("a waiter with a 5 s retry delay gets the lock within 1 s of its release") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("wake");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto waiter = rs.new_mutex(name, slow_retries());
    auto f = waiter.lock_future();
    REQUIRE(wait_until([&] { return waiting(c, name) == 1 && subscribers(c, name) == 1; }, 2s));
    const auto released = clock_type::now();
    REQUIRE(holder.unlock(redsync::context{}).ok());
    REQUIRE(f.wait_for(4s) == std::future_status::ready);
    const auto took = clock_type::now() - released;
    auto r = f.get();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(took < 1s);
    // The refused attempt, one look once subscribed, the woken one, and at
    // most one more if the wake-up raced an attempt in flight.
    CHECK(r.attempts <= 4);
    // It left the line: at once where it won, asynchronously elsewhere.
    CHECK(wait_until([&] { return waiting(c, name) == 0; }, 2s));
  }

  TEST_CASE("the releaser cannot re-take its lock ahead of a waiter") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("no-retake");
    auto a = rs.new_mutex(name);
    REQUIRE(a.lock(redsync::context{}).ok());
    auto b = rs.new_mutex(name, slow_retries());
    auto f = b.lock_future();
    REQUIRE(wait_until([&] { return waiting(c, name) == 1; }, 2s));
    REQUIRE(a.unlock(redsync::context{}).ok());
    // Immediately, before the waiter's wake-up can land: the line says no.
    auto again = a.try_lock(redsync::context{});
    CHECK(again.busy());
    REQUIRE(f.wait_for(4s) == std::future_status::ready);
    CHECK(f.get().ok());
    int held_by_b = 0;
    for (std::size_t i = 0; i < c.size(); ++i) held_by_b += redis_client(c[i]).get(name) == b.value();
    CHECK(held_by_b >= 2);
  }

  TEST_CASE("waiters are served in arrival order") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("order");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());

    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
      threads.emplace_back([&, i] {
        auto m = rs.new_mutex(name, slow_retries());
        if (!m.lock(redsync::context{}).ok()) return;
        {
          std::lock_guard lk(mu);
          order.push_back(i);
        }
        std::this_thread::sleep_for(5ms);
        (void)m.unlock(redsync::context{});
      });
      // The next waiter arrives only once this one is in line.
      REQUIRE(wait_until([&] { return waiting(c, name) == i + 1; }, 2s));
    }
    REQUIRE(wait_until([&] { return subscribers(c, name) >= 1; }, 2s));
    const auto released = clock_type::now();
    REQUIRE(holder.unlock(redsync::context{}).ok());
    for (auto& t : threads) t.join();
    CHECK(order == std::vector<int>{0, 1, 2});
    // Each hand-over was a wake-up, not a 5 s retry delay.
    CHECK(clock_type::now() - released < 3s);
  }

  TEST_CASE("a waiter that gives up leaves the line and does not block the next one") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("give-up");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto quitter = rs.new_mutex(name, slow_retries());
    auto r = quitter.lock(redsync::context::timeout(200ms));
    CHECK(r.error == redsync::errc::deadline_exceeded);
    CHECK(wait_until([&] { return waiting(c, name) == 0; }, 2s));
    REQUIRE(holder.unlock(redsync::context{}).ok());
    auto next = rs.new_mutex(name, {.tries = 1});
    CHECK(next.lock(redsync::context{}).ok());
  }

}  // TEST_SUITE
