// The uncontended acquisition as a MULTI/EXEC transaction
// (lib/redlock/scripts/fast_acquire.hpp) on real servers: when it is used, and that
// every way it can fail leaves nothing held and no vote counted that the
// script would not have counted.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <string>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

bool key_on_any_node(cluster& c, const std::string& key) {
  for (std::size_t i = 0; i < c.size(); ++i)
    if (redis_client(c[i]).exists(key)) return true;
  return false;
}

long long fence_on(redsync::test::redis_server& s) {
  auto r = redis_client(s).command({"HGET", "redsync:node", "fence"});
  return r.type == redis_client::reply::kind::string ? std::stoll(r.str) : 0;
}

}  // namespace

TEST_SUITE("fast_acquire") {
  TEST_CASE(
      "an uncontended lock runs no script once the nodes' windows are known, and its token still grows") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("fast"));
    // The first acquisition of this Redsync learns each node's recorded window
    // from the script's answer.
    REQUIRE(m.lock(redsync::context{}).ok());
    const auto first = m.token().value;
    REQUIRE(m.unlock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).reset_stats();

    REQUIRE(m.lock(redsync::context{}).ok());
    CHECK(m.token().value > first);
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client client(c[i]);
      CHECK(client.calls("exec") == 1);
      CHECK(client.calls("evalsha") == 0);
      CHECK(client.calls("eval") == 0);
      CHECK(fence_on(c[i]) >= static_cast<long long>(m.token().value) - 0);
    }
    // Held for real: another client is refused, on every node.
    auto other = rs.new_mutex(m.name());
    CHECK(other.try_lock(redsync::context{}).busy());
    REQUIRE(m.unlock(redsync::context{}).ok());
    CHECK_FALSE(key_on_any_node(c, m.name()));
  }

  TEST_CASE("a multi-name lock always uses the script (all names or none)") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_multi_mutex({unique_name("multi-a"), unique_name("multi-b")});
    REQUIRE(m.lock(redsync::context{}).ok());
    REQUIRE(m.unlock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).reset_stats();
    REQUIRE(m.lock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) {
      CHECK(redis_client(c[i]).calls("exec") == 0);
      CHECK(redis_client(c[i]).calls("evalsha") == 1);
    }
    REQUIRE(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a record of the wrong type fails the transaction after its SET ran, and the SET is released") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("fast-wrongtype"), {.tries = 1});
    REQUIRE(m.lock(redsync::context{}).ok());
    REQUIRE(m.unlock(redsync::context{}).ok());
    // Two of three nodes: their counter is now a string. HINCRBY fails inside
    // EXEC, which does not undo the SET NX queued before it.
    for (std::size_t i = 0; i < 2; ++i) {
      redis_client client(c[i]);
      client.command({"DEL", "redsync:node"});
      client.command({"SET", "redsync:node", "not a hash"});
    }
    auto r = m.lock(redsync::context{});
    CHECK(r.error == redsync::errc::no_quorum);
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(r.nodes[i].status == redsync::node_status::reply_error);
      CHECK_MESSAGE(r.nodes[i].message.find("WRONGTYPE") != std::string::npos, r.nodes[i].message);
    }
    CHECK_FALSE(m.held());
    CHECK(wait_until([&] { return !key_on_any_node(c, m.name()); }, 2s));
  }

  TEST_CASE("a record whose window is below the expiry is not counted, and the next attempt raises it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("fast-window"), {.tries = 1});
    REQUIRE(m.lock(redsync::context{}).ok());
    REQUIRE(m.unlock(redsync::context{}).ok());
    // As if another client with a shorter expiry had repaired these nodes
    // after a flush: the recorded window is 100 ms, ours is 8 s.
    for (std::size_t i = 0; i < c.size(); ++i)
      redis_client(c[i]).command({"HSET", "redsync:node", "window", "100"});
    auto r = m.lock(redsync::context{});
    CHECK(r.error == redsync::errc::no_quorum);
    for (const auto& n : r.nodes) {
      CHECK(n.status == redsync::node_status::excluded);
      CHECK_MESSAGE(n.message.find("window (100 ms)") != std::string::npos, n.message);
    }
    CHECK(wait_until([&] { return !key_on_any_node(c, m.name()); }, 2s));
    // The next acquisition goes through the script, which raises the window.
    auto again = m.lock(redsync::context{});
    REQUIRE_MESSAGE(again.ok(), again.describe());
    for (std::size_t i = 0; i < c.size(); ++i) {
      auto w = redis_client(c[i]).command({"HGET", "redsync:node", "window"});
      CHECK(std::stoll(w.str) >= 8000);
    }
    REQUIRE(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a newcomer cannot take a lock released to a waiter: the release reserves it for the head") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("reserved");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    // A waiter that only a release's wake-up brings in (5 s retry delay).
    auto waiter = rs.new_mutex(name, {.tries = 100, .retry_delay = [](int) { return 5000ms; }});
    auto f = waiter.lock_future();
    REQUIRE(wait_until(
        [&] {
          return redis_client(c[0]).command({"ZCARD", name + ":redsync-line"}).integer == 1;
        },
        3s));
    // The newcomer knows every node's window, so it tries the transaction.
    auto newcomer = rs.new_mutex(name, {.tries = 1});
    REQUIRE(holder.unlock(redsync::context{}).ok());
    // Right after the release, every key holds the waiter's reservation or
    // its value: the newcomer's SET NX fails everywhere.
    auto r = newcomer.try_lock(redsync::context{});
    CHECK_MESSAGE(r.busy(), r.describe());
    REQUIRE(f.wait_for(3s) == std::future_status::ready);
    auto got = f.get();
    CHECK_MESSAGE(got.ok(), got.describe());
    CHECK(waiter.token().value > holder.token().value);
    auto unlocked = waiter.unlock(redsync::context{});
    REQUIRE_MESSAGE(unlocked.ok(), unlocked.describe());
    for (std::size_t i = 0; i < c.size(); ++i) {
      auto v = redis_client(c[i]).get(name);
      CHECK_MESSAGE(!v, "node ", i, " still holds ", v.value_or(""), " pttl ", redis_client(c[i]).pttl(name));
    }
  }
}

TEST_SUITE("fast_acquire") {
  TEST_CASE("with two of five nodes frozen, the transaction still gets the lock on the other three") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    for (bool fail_fast : {false, true}) {
      CAPTURE(fail_fast);
      auto m = rs.new_mutex(unique_name("fast-frozen"), {.fail_fast = fail_fast});
      REQUIRE(m.lock(redsync::context{}).ok());
      REQUIRE(m.unlock(redsync::context{}).ok());
      c[3].pause();
      c[4].pause();
      for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        auto r = m.lock(redsync::context::timeout(5s));
        CHECK_MESSAGE(r.ok(), r.describe());
        CHECK(std::chrono::steady_clock::now() - t0 < 2s);
        auto u = m.unlock(redsync::context::timeout(5s));
        CHECK_MESSAGE(u.ok(), u.describe());
      }
      c[3].resume();
      c[4].resume();
    }
  }
}
