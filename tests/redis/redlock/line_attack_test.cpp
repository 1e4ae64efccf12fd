// Attacks on the waiting line of commit 9fdfd4b (scripts.hpp: rules R, H,
// L, U, A), each a schedule against real redis-server processes that breaks
// a rule or a claim the protocol documents. Every case here is expected to
// FAIL until lib/ is fixed (review report, branch `attack`).

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "slow_node.hpp"
#include "tcp_proxy.hpp"
#include "wait.hpp"

#include "redlock/scripts/scripts.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;
using reply_kind = redis_client::reply::kind;

namespace {

namespace d = redsync::detail;

// The acquire script on one node, one name, as acquisition.cpp sends it.
redis_client::reply acquire(redis_client& node, const std::string& name, const std::string& value,
                            const std::string& arrival, const std::string& lease_ms, const std::string& mode,
                            const std::string& fresh_arrival) {
  return node.command({"EVAL", std::string(d::acquire_script().source), "4", name, std::string(d::record_key),
                       d::line_key(name), d::lease_key(name), value, "30000", arrival, lease_ms, mode,
                       fresh_arrival, d::release_channel(name)});
}

// The release script; `undo`: a failed attempt's undo (rule U).
redis_client::reply release(redis_client& node, const std::string& name, const std::string& value,
                            bool undo) {
  return node.command({"EVAL", std::string(d::release_script().source), "3", name, d::line_key(name),
                       d::lease_key(name), value, undo ? "1" : "0", d::release_channel(name)});
}

void sleep_until(clock_type::time_point t) {
  std::this_thread::sleep_until(t);
}

}  // namespace

TEST_SUITE("line_attack") {
  // HIGH (safety). send_undo_unawaited (mutex_rounds.cpp) sends the undo
  // with no `fallback_wanted`: where the node answers its EVALSHA with
  // NOSCRIPT, the EVAL fallback goes out one round trip later, on the same
  // connection, *after* whatever the acquisition sent meanwhile. With a
  // retry delay shorter than that round trip the next attempt's acquire
  // runs first and wins the node; the late undo (same value) then deletes
  // that win. The acquisition is confirmed on a quorum that includes the
  // node, while the key there is gone: a second client takes the lock.
  //   node 2 (slow, script cache lost, acquire re-cached by anyone):
  //     acq#0 (X holds: join) | undo#0 EVALSHA -> NOSCRIPT | acq#1 .. |
  //     X lets go | acq#3 wins (decisive: node 1 won too) | undo#0 EVAL
  //     deletes W's key | ...
  TEST_CASE_FIXTURE(
      slow_last_node,
      "an unawaited undo answered NOSCRIPT runs after the next attempt's win and deletes the holder's key") {
    const auto name = unique_name("attack-undo-noscript");
    warm_with_10s_lock(rs, "attack-undo-warm");  // every attempt of the 30 s lock below is the acquire script
    for (std::size_t i = 0; i < 3; ++i)
      REQUIRE(redis_client(c[i]).command({"SET", name, "X", "PX", "60000"}).str == "OK");
    // Node 2 lost its script cache; since then some client ran an
    // acquisition there, but nobody a release.
    flush_scripts_but(c[2], d::acquire_script());
    // Command timeout 1.5 s (30 s * 0.05): a 1.2 s round trip to node 2 fits.
    auto m = rs.new_mutex(name, {.expiry = 30s,
                                 .tries = 1000,
                                 .retry_delay = [](int) { return 300ms; },
                                 .value = std::string("W"),
                                 .fail_fast = true});
    slow.delay(600ms);
    const auto t0 = clock_type::now();
    auto held = std::async(std::launch::async, [&] { return m.lock(redsync::context::timeout(20s)); });
    // Attempts at ~0, 300, 600 ms fail fast on nodes 0 and 1 (X) and undo
    // node 2 unawaited: each undo's EVALSHA reaches node 2 at ~600, 900,
    // 1200 ms and is answered NOSCRIPT (no release ran there yet); its EVAL
    // lands 1.2 s later, the first at ~1800 ms.
    sleep_until(t0 + 750ms);
    redis_client(c[1]).command({"DEL", name});  // the attempt at ~900 ms waits for node 2
    sleep_until(t0 + 1350ms);
    redis_client(c[2]).command({"DEL", name});  // after acq@600 ran there (~1200), before acq@900 (~1500)
    auto r = held.get();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    // Let every late command land.
    std::this_thread::sleep_for(2500ms);
    slow.normal();
    auto on2 = redis_client(c[2]).command({"GET", name});
    CHECK_MESSAGE(on2.type == reply_kind::string, "node 2 has no key for the holder");
    CHECK_MESSAGE(on2.str == "W", "node 2 holds '", on2.str, "' instead of the holder's value");
    // X's key on node 0 goes: another client takes nodes 0 and 2, a quorum,
    // while W's lock is valid for another ~26 s.
    redis_client(c[0]).command({"DEL", name});
    redsync::Redsync rs2(c.uris(), fresh_nodes());
    auto u = rs2.new_mutex(name, {.expiry = 30s, .tries = 10});
    auto second = u.lock(redsync::context::timeout(5s));
    CHECK_FALSE_MESSAGE(second.ok(), "two holders: W (believes it holds nodes 1 and 2) and another client");
    if (second.ok()) (void)u.unlock(redsync::context::timeout(5s));
    (void)m.unlock(redsync::context::timeout(5s));
  }

  // LOW (fairness, rule A / the fairness claim). live_head() only ever
  // looks at the front of a line, so a waiter whose lease ran out while a
  // live waiter was ahead of it is never removed; the acquire script only
  // checks ZSCORE, so when it comes back (mode "2", as the client sends
  // where it was in line) it is told "-1, still in line", its lease is
  // renewed, and it keeps its old rank ahead of a waiter (U) that stayed
  // alive the whole time. scripts.hpp: "A waiter whose lease ran out ...
  // goes to the back". (A second path: a node whose last answer timed out
  // is `maybe`, gets the join call "1" at the old arrival_, and re-inserts
  // us at the old rank there even after we were evicted.)
  TEST_CASE("a waiter whose lease ran out behind a live head comes back at its old rank") {
    cluster c(1);
    redis_client node(c[0]);
    const auto name = unique_name("attack-stale-rank");
    REQUIRE(acquire(node, name, "H", "100", "10000", "0", "100").type == reply_kind::array);
    CHECK(acquire(node, name, "V", "200", "10000", "1", "200").integer == -2);
    CHECK(acquire(node, name, "W", "300", "300", "1", "300").integer == -1);
    CHECK(acquire(node, name, "U", "400", "10000", "1", "400").integer == -1);
    std::this_thread::sleep_for(700ms);  // W's 300 ms lease is long gone
    CHECK(acquire(node, name, "U", "400", "10000", "2", "500").integer == -1);
    auto back = acquire(node, name, "W", "300", "10000", "2", "600");
    CHECK_MESSAGE(back.integer == -3, "W was told ", back.integer,
                  " (still in line), not -3 (put at the back)");
    const auto w = node.command({"ZSCORE", d::line_key(name), "W"});
    const auto u = node.command({"ZSCORE", d::line_key(name), "U"});
    CHECK_MESSAGE(std::stoll(w.str) > std::stoll(u.str), "W is still ahead of U: W at ", w.str, ", U at ",
                  u.str);
  }

  // LOW-MEDIUM (rule R / L). The acquire script's winning branch renews
  // the head's lease (HSET) but not the TTL of the line and lease keys; only
  // the join branch does. A head that keeps winning a minority (its
  // attempts fail elsewhere, say a holder whose key on this node is gone
  // still holds the others) outlives its line there: the line key expires
  // with a live waiter in it, the reservation (PX = the line's PTTL) with
  // it, and the name is free for anyone's SET NX (the MULTI/EXEC first
  // attempt) although its live head is still refreshing.
  TEST_CASE("a head that wins a minority keeps its line and its reservation for as long as its lease") {
    cluster c(1);
    redis_client node(c[0]);
    const auto name = unique_name("attack-line-ttl");
    const auto t0 = clock_type::now();
    REQUIRE(acquire(node, name, "H", "100", "10000", "0", "100").type == reply_kind::array);
    CHECK(acquire(node, name, "W", "200", "800", "1", "200").integer == -2);  // line TTL 800 ms
    CHECK(release(node, name, "H", false).integer == 1);                      // reserved for W
    sleep_until(t0 + 500ms);
    // W's attempt wins here (and, say, loses the other nodes): its lease now
    // runs to ~1300 ms.
    auto won = acquire(node, name, "W", "200", "800", "2", "300");
    REQUIRE(won.type == reply_kind::array);
    CHECK(won.elements[4].integer == 1);
    CHECK(release(node, name, "W", true).integer == 1);  // undo: reserved for W again
    sleep_until(t0 + 950ms);                             // W's lease still has ~350 ms
    CHECK_MESSAGE(node.command({"ZSCORE", d::line_key(name), "W"}).type == reply_kind::string,
                  "the line expired under its live head");
    auto stolen = node.command({"SET", name, "newcomer", "NX", "PX", "10000"});
    CHECK_MESSAGE(stolen.type == reply_kind::nil, "a SET NX took a name reserved for a live head");
  }
}
