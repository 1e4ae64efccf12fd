// Redlock behaviour on healthy nodes: acquisition, mutual exclusion, release,
// extension, retries, and what the keys look like on every node.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <uv.h>

#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// A 1 ms..3 ms retry delay keeps contended tests fast.
redsync::mutex_options fast_retries(redsync::mutex_options o = {}) {
  o.retry_delay = [](int) { return 1ms + std::chrono::milliseconds(std::rand() % 3); };
  return o;
}

}  // namespace

TEST_SUITE("lock") {
  TEST_CASE("lock sets the value with a TTL on every node and until() honours the validity formula") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("roundtrip");
    const redsync::mutex_options opts{.expiry = 3s};
    auto m = rs.new_mutex(name, opts);

    const auto start = clock_type::now();
    auto r = m.lock(redsync::context{});
    const auto end = clock_type::now();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(r.attempts == 1);
    REQUIRE(r.nodes.size() == 5);
    for (const auto& n : r.nodes) CHECK(n.status == redsync::node_status::ok);

    // until = start + expiry - elapsed - drift, where drift = expiry*0.01 + 2 ms.
    const auto drift = std::chrono::duration_cast<clock_type::duration>(30ms + 2ms);
    const auto elapsed = end - start;
    CHECK(m.until() >= start + opts.expiry - elapsed - drift);
    CHECK(m.until() <= end + opts.expiry);
    CHECK(m.held());
    CHECK(m.value().size() == 24);

    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      CHECK(cl.get(name) == m.value());
      const auto pttl = cl.pttl(name);
      CHECK(pttl > 0);
      CHECK(pttl <= 3000);
    }

    auto u = m.unlock(redsync::context{});
    REQUIRE_MESSAGE(u.ok(), u.describe());
    CHECK_FALSE(m.held());
    for (std::size_t i = 0; i < c.size(); ++i) CHECK_FALSE(redis_client(c[i]).exists(name));
  }

  TEST_CASE("two independent Redsync instances exclude each other and try_lock reports busy quickly") {
    cluster c(5);
    redsync::Redsync a(c.uris(), fresh_nodes());
    redsync::Redsync b(c.uris(), fresh_nodes());
    const auto name = unique_name("exclusion");
    auto ma = a.new_mutex(name);
    auto mb = b.new_mutex(name);

    REQUIRE(ma.lock(redsync::context{}).ok());
    const auto t0 = clock_type::now();
    auto r = mb.try_lock(redsync::context{});
    CHECK(clock_type::now() - t0 < 1s);
    CHECK_FALSE(r.ok());
    CHECK(r.busy());
    CHECK(r.error == redsync::errc::busy);
    CHECK(r.attempts == 1);
    CHECK(r.nodes_with(redsync::node_status::taken).size() == 5);
    // The standard-style try_lock says the same.
    CHECK_FALSE(mb.try_lock());
    // A busy try_lock must not disturb the holder's keys.
    CHECK(redis_client(c[0]).get(name) == ma.value());

    REQUIRE(ma.unlock(redsync::context{}).ok());
    auto r2 = mb.try_lock(redsync::context{});
    CHECK_MESSAGE(r2.ok(), r2.describe());
    CHECK(mb.unlock(redsync::context{}).ok());
  }

  TEST_CASE("8 threads x 300 increments of a plain counter under one lock name end at exactly 2400") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("counter");
    long counter = 0;  // deliberately not atomic: the lock is the only protection
    std::atomic<int> failures{0};
    std::mutex first_failure_mutex;
    std::string first_failure;
    const auto failed = [&](const std::string& what) {
      ++failures;
      const std::lock_guard<std::mutex> lk(first_failure_mutex);
      if (first_failure.empty()) first_failure = what;
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        // A 10 s expiry gives each node 500 ms to answer: 8 threads on a
        // loaded 2-core machine under ASan miss 100 ms now and then.
        auto m = rs.new_mutex(name, fast_retries({.expiry = 10s, .tries = 100000}));
        for (int i = 0; i < 300; ++i) {
          const auto locked = m.lock(redsync::context{});
          if (!locked.ok()) {
            failed("lock: " + locked.describe());
            continue;
          }
          const long seen = counter;
          counter = seen + 1;
          const auto unlocked = m.unlock(redsync::context{});
          if (!unlocked.ok()) failed("unlock: " + unlocked.describe());
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK_MESSAGE(failures.load() == 0, first_failure);
    CHECK(counter == 2400);
  }

  TEST_CASE("unlock where another holder owns a quorum fails as taken, names the nodes, leaves their keys") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("foreign");
    auto m = rs.new_mutex(name);
    REQUIRE(m.lock(redsync::context{}).ok());
    // Another holder's value on nodes 0, 2 and 4.
    for (std::size_t i : {0u, 2u, 4u})
      redis_client(c[i]).command({"SET", name, "someone-else", "PX", "60000"});

    auto r = m.unlock(redsync::context{});
    CHECK_FALSE(r.ok());
    CHECK(r.error == redsync::errc::taken);
    const auto taken = r.nodes_with(redsync::node_status::taken);
    CHECK(taken == std::vector<std::string>{c[0].address(), c[2].address(), c[4].address()});
    for (std::size_t i : {0u, 2u, 4u}) CHECK(redis_client(c[i]).get(name) == std::string("someone-else"));
    for (std::size_t i : {1u, 3u}) CHECK_FALSE(redis_client(c[i]).exists(name));
  }

  TEST_CASE("unlock after the lock expired reports expired, not taken") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("expired");
    // Each node gets half the expiry to answer (the default 5 % of 150 ms,
    // 7.5 ms, is missed on a loaded machine, and a node that did not answer
    // is not "missing").
    auto m = rs.new_mutex(name, {.expiry = 300ms, .timeout_factor = 0.5});
    REQUIRE(m.lock(redsync::context{}).ok());
    REQUIRE(wait_until(
        [&] {
          for (std::size_t i = 0; i < c.size(); ++i)
            if (redis_client(c[i]).exists(name)) return false;
          return true;
        },
        5s));
    CHECK_FALSE(m.held());
    auto r = m.unlock(redsync::context{});
    CHECK(r.error == redsync::errc::expired);
    CHECK(r.nodes_with(redsync::node_status::missing).size() == 3);
    // Nothing is held any more: a second unlock is not a release of anything.
    CHECK(m.unlock(redsync::context{}).error == redsync::errc::not_held);
  }

  TEST_CASE("unlock that cannot tell whether a majority held the lock is no_quorum, not expired") {
    // A holder whose quorum was exactly three of five (two nodes never had
    // its key) loses one of the three to kill -9: two say "ours", two
    // "missing", one is unreachable. The unreachable one may still have held
    // it, so "expired" would be a claim we cannot make.
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("unsure");
    auto m = rs.new_mutex(name, {.expiry = 10s});
    REQUIRE(m.lock(redsync::context{}).ok());
    for (std::size_t i : {3u, 4u}) redis_client(c[i]).command({"DEL", name});
    c[2].kill();
    auto r = m.unlock(redsync::context{});
    CHECK_MESSAGE(r.error == redsync::errc::no_quorum, r.describe());
    CHECK(r.nodes_with(redsync::node_status::ok).size() == 2);
    CHECK(r.nodes_with(redsync::node_status::missing).size() == 2);
    for (std::size_t i : {0u, 1u}) CHECK_FALSE(redis_client(c[i]).exists(name));
    // Not known to be gone, so the release may be retried (not not_held):
    // now four nodes say "missing", and that is expired.
    CHECK(m.unlock(redsync::context{}).error == redsync::errc::expired);
    // With a third node saying "missing", no majority can hold it: expired.
    auto m2 = rs.new_mutex(unique_name("gone"), {.expiry = 10s});
    REQUIRE(m2.lock(redsync::context{}).ok());
    for (std::size_t i : {0u, 3u, 4u}) redis_client(c[i]).command({"DEL", m2.name()});
    auto r2 = m2.unlock(redsync::context{});
    CHECK_MESSAGE(r2.error == redsync::errc::expired, r2.describe());
  }

  TEST_CASE("unlock on a mutex that never acquired is not_held and sends nothing") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    redis_client cl(c[0]);
    cl.reset_stats();
    auto m = rs.new_mutex(unique_name("never"));
    auto r = m.unlock(redsync::context{});
    CHECK(r.error == redsync::errc::not_held);
    CHECK(cl.calls("evalsha") == 0);
    CHECK(cl.calls("eval") == 0);
  }

  TEST_CASE("extend raises the TTL on every node and moves until()") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("extend");
    auto m = rs.new_mutex(name, {.expiry = 3s});
    REQUIRE(m.lock(redsync::context{}).ok());
    const auto until_before = m.until();
    REQUIRE(wait_until([&] { return redis_client(c[0]).pttl(name) < 2700; }, 3s));

    auto r = m.extend();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(m.until() > until_before);
    for (std::size_t i = 0; i < c.size(); ++i) {
      const auto pttl = redis_client(c[i]).pttl(name);
      CHECK(pttl > 2800);
      CHECK(pttl <= 3000);
    }
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("extend after the lock expired fails as expired") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("extend-late");
    auto m = rs.new_mutex(name, {.expiry = 150ms});
    REQUIRE(m.lock(redsync::context{}).ok());
    // Every node's key has expired (a loaded node may have run its SET, and
    // so started its 150 ms, later than the others).
    const auto gone_everywhere = [&] {
      for (std::size_t i = 0; i < c.size(); ++i)
        if (redis_client(c[i]).exists(name)) return false;
      return true;
    };
    REQUIRE(wait_until(gone_everywhere, 3s));
    auto r = m.extend();
    CHECK(r.error == redsync::errc::expired);
    CHECK(gone_everywhere());  // the failed extension re-created nothing
  }

  TEST_CASE("set_nx_on_extend re-creates a missing key with our value") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("extend-nx");
    auto m = rs.new_mutex(name, {.expiry = 3s, .set_nx_on_extend = true});
    REQUIRE(m.lock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).command({"DEL", name});
    auto r = m.extend();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      CHECK(cl.get(name) == m.value());
      CHECK(cl.pttl(name) > 2000);
    }
    // Without the option, the same situation is "expired".
    auto plain = rs.new_mutex(unique_name("extend-plain"), {.expiry = 3s});
    REQUIRE(plain.lock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).command({"DEL", plain.name()});
    CHECK(plain.extend().error == redsync::errc::expired);
  }

  TEST_CASE("lock makes exactly `tries` attempts and calls the delay function with each try number") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("tries");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).reset_stats();

    std::vector<int> delays_asked;
    std::mutex mu;
    auto waiter = rs.new_mutex(name, {.tries = 4, .retry_delay = [&](int try_number) {
                                        std::lock_guard lk(mu);
                                        delays_asked.push_back(try_number);
                                        return 20ms;
                                      }});
    const auto t0 = clock_type::now();
    auto r = waiter.lock(redsync::context{});
    const auto took = clock_type::now() - t0;
    CHECK(r.error == redsync::errc::busy);
    CHECK(r.attempts == 4);
    CHECK(delays_asked == std::vector<int>{1, 2, 3});
    // Delays of 20 ms between tries.
    CHECK(took >= 60ms);
    // One SET NX per try on every node, and one more: the first attempt
    // tries the transaction (fast_acquire.hpp) and, refused, joins the line
    // with the script on that node. A waiter also looks once, for free, when
    // its release subscription is confirmed (a release before it was not
    // heard): at most one more.
    for (std::size_t i = 0; i < c.size(); ++i) {
      CHECK(redis_client(c[i]).calls("exec") == 1);
      CHECK(redis_client(c[i]).calls("set") >= 5);
      CHECK(redis_client(c[i]).calls("set") <= 6);
    }
  }

  TEST_CASE("the default retry delay waits between 50 and 250 ms per try") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("default-delay");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto waiter = rs.new_mutex(name, {.tries = 5});
    const auto t0 = clock_type::now();
    auto r = waiter.lock(redsync::context{});
    const auto took = clock_type::now() - t0;
    CHECK(r.attempts == 5);
    CHECK(took >= 4 * 50ms);
    CHECK(took < 4 * 250ms + 2s);  // generous: the upper bound is loose on a loaded machine
  }

  TEST_CASE("unlock still works after SCRIPT FLUSH, through the EVAL fallback") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("flush");
    auto m = rs.new_mutex(name);
    REQUIRE(m.lock(redsync::context{}).ok());
    REQUIRE(m.extend().ok());  // caches the scripts
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      cl.command({"SCRIPT", "FLUSH"});
      cl.reset_stats();
    }
    auto r = m.unlock(redsync::context{});
    REQUIRE_MESSAGE(r.ok(), r.describe());
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      CHECK_FALSE(cl.exists(name));
      CHECK(cl.calls("eval") == 1);  // the fallback ran
    }
  }

  TEST_CASE("the release script's SHA1 is the one Redis computes") {
    cluster c(1);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("sha"));
    REQUIRE(m.lock(redsync::context{}).ok());
    redis_client cl(c[0]);
    cl.reset_stats();
    REQUIRE(m.unlock(redsync::context{}).ok());
    // EVALSHA succeeded without the EVAL fallback only if our SHA1 matched the
    // cached script (loaded on first use by the fallback, or not at all).
    CHECK(cl.calls("evalsha") == 1);
  }

  TEST_CASE("valid checks the value on a quorum over the network") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("valid");
    auto m = rs.new_mutex(name);
    CHECK(m.valid().error == redsync::errc::not_held);
    REQUIRE(m.lock(redsync::context{}).ok());
    CHECK(m.valid().ok());
    for (std::size_t i : {0u, 1u}) redis_client(c[i]).command({"SET", name, "other"});
    auto r = m.valid();
    CHECK(r.error == redsync::errc::taken);
  }

  TEST_CASE("a deadline bounds lock on a busy name and reports deadline_exceeded") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("deadline");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto waiter = rs.new_mutex(name);
    const auto t0 = clock_type::now();
    auto r = waiter.lock(redsync::context::timeout(300ms));
    const auto took = clock_type::now() - t0;
    CHECK(r.error == redsync::errc::deadline_exceeded);
    CHECK(took >= 300ms);
    CHECK(took < 600ms + 1s);
  }

  TEST_CASE("a stop_token cancels a waiting lock and reports cancelled") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("cancel");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto waiter = rs.new_mutex(name);
    std::stop_source stop;
    auto fut = waiter.lock_future(redsync::context::cancellable(stop.get_token()));
    CHECK(fut.wait_for(100ms) == std::future_status::timeout);
    stop.request_stop();
    REQUIRE(fut.wait_for(2s) == std::future_status::ready);
    CHECK(fut.get().error == redsync::errc::cancelled);
    // A token stopped before the call cancels it without waiting.
    auto r = waiter.lock(redsync::context::cancellable(stop.get_token()));
    CHECK(r.error == redsync::errc::cancelled);
    CHECK(redis_client(c[0]).get(name) == holder.value());
  }

  TEST_CASE("Mutex works with std::lock_guard, std::unique_lock and try_lock_for") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("std");
    auto m = rs.new_mutex(name);
    {
      std::lock_guard guard(m);
      CHECK(m.held());
      CHECK(redis_client(c[0]).get(name) == m.value());
    }
    CHECK_FALSE(redis_client(c[0]).exists(name));

    auto other = rs.new_mutex(name);
    std::unique_lock lk(m);
    CHECK_FALSE(other.try_lock_for(150ms));
    lk.unlock();
    CHECK(other.try_lock_for(2s));
    other.unlock();
    CHECK(other.last_result().ok());
  }

  TEST_CASE("std lock() throws lock_error with the outcome when it cannot acquire") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("throws");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto waiter = rs.new_mutex(name, fast_retries({.tries = 2}));
    try {
      waiter.lock();
      FAIL("lock() returned without the lock");
    } catch (const redsync::lock_error& e) {
      CHECK(e.outcome().busy());
      CHECK(e.code() == redsync::errc::busy);
    }
  }

  TEST_CASE("a fixed value and a custom generator are used as the lock value") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto fixed = rs.new_mutex(unique_name("fixed"), {.value = std::string("my-token")});
    REQUIRE(fixed.lock(redsync::context{}).ok());
    CHECK(fixed.value() == "my-token");
    CHECK(redis_client(c[1]).get(fixed.name()) == std::string("my-token"));
    int n = 0;
    auto gen =
        rs.new_mutex(unique_name("gen"), {.value_generator = [&] { return "v" + std::to_string(++n); }});
    REQUIRE(gen.lock(redsync::context{}).ok());
    CHECK(gen.value() == "v1");
  }

  TEST_CASE("default values of 100 acquisitions are distinct 24-character base64 strings") {
    cluster c(1);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("values"));
    std::set<std::string> seen;
    for (int i = 0; i < 100; ++i) {
      REQUIRE(m.lock(redsync::context{}).ok());
      CHECK(m.value().size() == 24);
      seen.insert(m.value());
      REQUIRE(m.unlock(redsync::context{}).ok());
    }
    CHECK(seen.size() == 100);
  }

  TEST_CASE("asynchronous lock calls back once, on the loop thread, never inside the call") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("async"));
    std::promise<std::pair<redsync::result, std::thread::id>> p;
    std::atomic<bool> returned{false};
    std::atomic<bool> called_before_return{false};
    m.lock_async(redsync::context{}, [&](redsync::result r) {
      if (!returned) called_before_return = true;
      p.set_value({std::move(r), std::this_thread::get_id()});
    });
    returned = true;
    auto f = p.get_future();
    REQUIRE(f.wait_for(2s) == std::future_status::ready);
    auto [r, tid] = f.get();
    CHECK(r.ok());
    CHECK(tid != std::this_thread::get_id());
    CHECK_FALSE(called_before_return.load());
    CHECK(m.unlock_future().get().ok());
  }

  TEST_CASE("a multi-name lock takes all names on each node or none") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto a = unique_name("multi-a"), b = unique_name("multi-b"), d = unique_name("multi-d");
    auto m = rs.new_multi_mutex({a, b, d});
    CHECK(m.names() == std::vector<std::string>{a, b, d});
    REQUIRE(m.lock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i)
      for (const auto& k : {a, b, d}) CHECK(redis_client(c[i]).get(k) == m.value());
    // A single-name lock on one of them is busy.
    auto single = rs.new_mutex(b, {.tries = 1});
    CHECK(single.lock(redsync::context{}).busy());
    REQUIRE(m.extend().ok());
    CHECK(m.valid().ok());
    REQUIRE(m.unlock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i)
      for (const auto& k : {a, b, d}) CHECK_FALSE(redis_client(c[i]).exists(k));

    // One name already held elsewhere: nothing of the set is taken. While
    // it waits, the free names are reserved for it (the head of their
    // lines), and freed once it gives up.
    REQUIRE(single.lock(redsync::context{}).ok());
    auto r = m.lock(redsync::context{.deadline = clock_type::now() + 200ms});
    CHECK_FALSE(r.ok());
    for (std::size_t i = 0; i < c.size(); ++i) {
      CHECK(redis_client(c[i]).get(a) != m.value());
      CHECK(redis_client(c[i]).get(d) != m.value());
    }
    CHECK(wait_until(
        [&] {
          for (std::size_t i = 0; i < c.size(); ++i)
            if (redis_client(c[i]).exists(a) || redis_client(c[i]).exists(d)) return false;
          return true;
        },
        3s));
  }

  TEST_CASE("a multi-name lock rejects an empty list and duplicate names") {
    cluster c(1);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    CHECK_THROWS_AS((void)rs.new_multi_mutex({}), redsync::config_error);
    CHECK_THROWS_WITH_AS((void)rs.new_multi_mutex({"x", "y", "x"}), doctest::Contains("\"x\""),
                         redsync::config_error);
    CHECK_THROWS_AS((void)rs.new_multi_mutex({"x", ""}), redsync::config_error);
  }

  TEST_CASE("a node list naming one server twice is rejected, also with another db, naming both positions") {
    cluster c(2);
    const std::string a = c[0].address();
    const std::string expected = "nodes 1 and 3 are the same server (" + a + ")";
    CHECK_THROWS_WITH_AS(redsync::Redsync({c[0].uri(), c[1].uri(), c[0].uri()}, fresh_nodes()),
                         doctest::Contains(expected.c_str()), redsync::config_error);
    CHECK_THROWS_AS(redsync::Redsync({"redis://" + a + "/0", "redis://" + a + "/1"}, fresh_nodes()),
                    redsync::config_error);
    CHECK_NOTHROW(redsync::Redsync({c[0].uri(), c[1].uri()}, fresh_nodes()));
  }

  TEST_CASE("mutexes are not reentrant: locking a held mutex again reports already_held") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("reentrant");
    auto m = rs.new_mutex(name);
    REQUIRE(m.lock(redsync::context{}).ok());
    const auto value = m.value();
    auto again = m.lock(redsync::context{});
    CHECK(again.error == redsync::errc::already_held);
    CHECK_FALSE(m.try_lock());
    CHECK(m.value() == value);
    CHECK(redis_client(c[0]).get(name) == value);
    CHECK(m.unlock(redsync::context{}).ok());
    CHECK(m.lock(redsync::context{}).ok());  // after release it can be taken again
  }

  TEST_CASE("shuffle_nodes still takes and releases the lock on every node") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("shuffle");
    auto m = rs.new_mutex(name, {.shuffle_nodes = true});
    for (int i = 0; i < 10; ++i) {
      REQUIRE(m.lock(redsync::context{}).ok());
      for (std::size_t n = 0; n < c.size(); ++n) CHECK(redis_client(c[n]).get(name) == m.value());
      // Results stay in node order whatever order the nodes were asked in.
      auto u = m.unlock(redsync::context{});
      REQUIRE(u.ok());
      for (std::size_t n = 0; n < c.size(); ++n) CHECK(u.nodes[n].address == c[n].address());
    }
  }

  TEST_CASE(
      "on an application-owned loop, callbacks run on that loop and blocking calls there report "
      "would_deadlock") {
    cluster c(3);
    uv_loop_t loop;
    REQUIRE(uv_loop_init(&loop) == 0);
    // Keeps the loop running until the test is done with it.
    uv_async_t stop;
    uv_async_init(&loop, &stop, [](uv_async_t* h) { uv_close(reinterpret_cast<uv_handle_t*>(h), nullptr); });
    // Made before the loop runs: libuv handles are created on the loop's
    // thread or while nobody runs it.
    std::optional<redsync::Redsync> made(std::in_place, c.uris(), fresh_nodes({.loop = &loop}));
    std::thread runner([&] { uv_run(&loop, UV_RUN_DEFAULT); });

    {
      redsync::Redsync& rs = *made;
      auto m = rs.new_mutex(unique_name("external-loop"));
      std::promise<std::pair<redsync::result, redsync::result>> p;
      m.lock_async(redsync::context{}, [&](redsync::result r) {
        // On the loop's own thread a blocking call would wait for itself.
        p.set_value({std::move(r), m.valid(redsync::context{})});
      });
      auto f = p.get_future();
      REQUIRE(f.wait_for(3s) == std::future_status::ready);
      auto [locked, blocking] = f.get();
      CHECK(locked.ok());
      CHECK(blocking.error == redsync::errc::would_deadlock);
      // From another thread, blocking calls work while the loop runs.
      CHECK(m.valid(redsync::context{}).ok());
      CHECK(m.unlock(redsync::context{}).ok());
    }
    made.reset();  // destroyed from this thread while the loop runs: it closes its handles

    uv_async_send(&stop);
    runner.join();
    CHECK(uv_loop_close(&loop) == 0);  // nothing of ours left on it
  }

}  // TEST_SUITE
