// The holder's conveniences for users coming from Go, node-redlock and
// std::mutex: extend(duration), remaining(), waiting without a limit
// (tries = unlimited_tries) and a fixed retry delay (`.retry_delay = 400ms`).

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

TEST_SUITE("holder api") {
  TEST_CASE("extend(300ms) sets the keys' TTL to about 300 ms on every node and the validity from it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("extend-ms");
    auto m = rs.new_mutex(name, {.expiry = 5s});
    REQUIRE(m.lock(redsync::context{}).ok());
    const auto sent = clock_type::now();
    REQUIRE(m.extend(300ms).ok());
    // drift = 300 ms * 0.01 + 2 ms = 5 ms.
    CHECK(m.until() <= sent + 300ms - 5ms + 50ms);
    CHECK(m.until() >= sent + 300ms - 5ms);
    CHECK(m.remaining() <= 295ms);
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      const auto pttl = cl.pttl(name);
      CHECK(pttl > 0);
      CHECK(pttl <= 300);
    }
    // The asynchronous and future forms take it too; the expiry itself is allowed.
    CHECK(m.extend_future(2s).get().ok());
    CHECK(m.remaining() > 1500ms);
    std::promise<redsync::result> done;
    m.extend_async(5s, redsync::context{}, [&](redsync::result r) { done.set_value(std::move(r)); });
    CHECK(done.get_future().get().ok());
    for (std::size_t i = 0; i < c.size(); ++i) CHECK(redis_client(c[i]).pttl(name) > 4000);
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("extend by more than the expiry, by zero, or by another duration under auto_extend is refused") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("extend-refused");
    auto m = rs.new_mutex(name, {.expiry = 2s});
    REQUIRE(m.lock(redsync::context{}).ok());
    CHECK_THROWS_WITH_AS(m.extend(3s), doctest::Contains("Mutex::extend(3000 ms)"), redsync::config_error);
    CHECK_THROWS_WITH_AS(m.extend(3s), doctest::Contains("longer than mutex_options.expiry (2000 ms)"),
                         redsync::config_error);
    CHECK_THROWS_WITH_AS(m.extend_future(0ms), doctest::Contains("must be positive"), redsync::config_error);
    CHECK_THROWS_AS(m.extend_async(-1s, redsync::context{}, [](redsync::result) {}), redsync::config_error);
    // Nothing was sent: the keys still have the lock's TTL.
    CHECK(redis_client(c[0]).pttl(name) > 1000);

    auto w = rs.new_mutex(unique_name("extend-refused-watchdog"), {.expiry = 2s, .auto_extend = true});
    REQUIRE(w.lock(redsync::context{}).ok());
    CHECK_THROWS_WITH_AS(w.extend(1s), doctest::Contains("auto_extend"), redsync::config_error);
    CHECK(w.extend(2s).ok());
    CHECK(w.unlock(redsync::context{}).ok());
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("remaining() is zero before the lock, counts down while held, and is zero after unlock") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("remaining"), {.expiry = 2s});
    CHECK(m.remaining() == 0ms);
    REQUIRE(m.lock(redsync::context{}).ok());
    const auto first = m.remaining();
    CHECK(first > 1500ms);
    CHECK(first < 2s);
    REQUIRE(redsync::test::wait_until([&] { return m.remaining() < first; }, 1s));
    CHECK(m.remaining() > 0ms);
    redsync::guard g(m);  // already held: the guard does not own it, but reads the same validity
    CHECK(g.remaining() <= first);
    CHECK(m.unlock(redsync::context{}).ok());
    CHECK(m.remaining() == 0ms);

    // A short extension that then runs out: zero once expired.
    REQUIRE(m.lock(redsync::context{}).ok());
    REQUIRE(m.extend(100ms).ok());
    CHECK(m.remaining() <= 97ms);  // drift = 100 ms * 0.01 + 2 ms
    CHECK(redsync::test::wait_until([&] { return !m.held(); }, 1s));
    CHECK(m.remaining() == 0ms);
  }

  TEST_CASE("a fixed retry delay of 400 ms spaces the tries: 3 tries on a held lock take at least 800 ms") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("fixed-delay");
    auto holder = rs.new_mutex(name, {.expiry = 10s});
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto waiter = rs.new_mutex(name, {.expiry = 10s, .tries = 3, .retry_delay = 400ms});
    const auto r = waiter.lock(redsync::context{});
    CHECK(r.busy());
    CHECK(r.attempts == 3);
    // The default delays (50-250 ms) would take at most about 500 ms.
    CHECK(r.elapsed >= 800ms);
    CHECK(r.elapsed < 3s);
    CHECK(holder.unlock(redsync::context{}).ok());
  }

  TEST_CASE("with tries = unlimited_tries, std::lock_guard blocks past the default 32 tries, then gets it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("unlimited");
    auto holder = rs.new_mutex(name, {.expiry = 10s});
    REQUIRE(holder.lock(redsync::context{}).ok());
    redis_client node0(c[0]);
    const long long calls_before = redsync::test::script_calls(node0);

    auto patient =
        rs.new_mutex(name, {.expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = 10ms});
    auto acquired = std::async(std::launch::async, [&] {
      std::lock_guard g(patient);  // throws lock_error if the tries ran out
      return patient.last_result();
    });
    // Each try sends the acquire script once, and at most its undo, to each
    // node: 70 calls on node 0 are well past 32 tries, which the default
    // `tries` would end with lock_error.
    CHECK(redsync::test::wait_until([&] { return redsync::test::script_calls(node0) - calls_before >= 70; },
                                    10s));
    CHECK(acquired.wait_for(0ms) == std::future_status::timeout);

    holder.unlock();
    REQUIRE(acquired.wait_for(5s) == std::future_status::ready);
    const redsync::result outcome = acquired.get();
    CHECK(outcome.ok());
    MESSAGE("attempts " << outcome.attempts << ", calls "
                        << redsync::test::script_calls(node0) - calls_before);
    CHECK(outcome.attempts > 32);
  }
}
