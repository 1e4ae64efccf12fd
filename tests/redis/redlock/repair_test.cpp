// When a node that lost its data, or whose clock moved, votes again: the
// fencing counter's repair and the restart guard (lib/redlock/trust/node_trust.hpp),
// driven by short-lived clients, under a node clock a test can step
// (tests/support/clock_offset.hpp), and across a load of an older snapshot
// in place (DEBUG RELOAD).

#include "clock_offset.hpp"
#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// One short-lived client: a Redsync of its own that tries the lock once,
// lets it go, and is gone (each lives a few ms, far less than the repair
// delay). Returns whether node i's vote counted.
bool short_lived_client_counts(const std::vector<std::string>& uris, const std::string& name,
                               std::chrono::milliseconds expiry, std::size_t i) {
  redsync::Redsync rs(uris);
  auto m = rs.new_mutex(name, {.expiry = expiry, .tries = 1});
  auto r = m.lock(redsync::context::timeout(5s));
  if (r.ok()) (void)m.unlock(redsync::context::timeout(5s));
  return r.nodes.size() > i && r.nodes[i].status == redsync::node_status::ok;
}

// Short-lived clients one after another, `gap` apart, until node i's vote
// counts or `bound` has passed; returns how long that took, from the start
// of the first client (which is the first to meet the node), or nullopt.
std::optional<clock_type::duration> first_vote_of(const std::vector<std::string>& uris,
                                                  const std::string& name, std::chrono::milliseconds expiry,
                                                  std::size_t i, std::chrono::milliseconds gap,
                                                  std::chrono::seconds bound) {
  const auto start = clock_type::now();
  while (clock_type::now() - start < bound) {
    if (short_lived_client_counts(uris, name, expiry, i)) return clock_type::now() - start;
    std::this_thread::sleep_for(gap);
  }
  return std::nullopt;
}

redsync::redsync_options guard_with_window(std::chrono::milliseconds window) {
  return {.restart_guard = true, .restart_guard_window = window};
}

}  // namespace

TEST_SUITE("repair") {
  // Issue 21 §2: each client used to start the repair delay anew, so a
  // restarted node never voted again for clients that live shorter than it.
  TEST_CASE("a restarted node votes again about one repair delay after short-lived clients first meet it") {
    cluster nodes(3);
    prime_records(nodes.uris());
    const auto name = unique_name("app:repair-short");
    constexpr auto expiry = 2000ms;  // the repair delay and the guard window
    // The records name each node since priming; let the guard window pass
    // for the nodes that stay up.
    REQUIRE(redsync::test::wait_until(
        [&] { return short_lived_client_counts(nodes.uris(), name, expiry, 0); }, 15s));
    nodes[2].restart();
    const auto took = first_vote_of(nodes.uris(), name, expiry, 2, 300ms, 30s);
    REQUIRE_MESSAGE(took, "node 2 never voted again");
    // Never before the repair delay (the first client met the node after
    // `start`); within a few delays on a loaded machine.
    CHECK(*took >= expiry);
    CHECK(*took < 4 * expiry + 4s);
    // The repair left no mark behind.
    CHECK(redis_client(nodes[2]).command({"HEXISTS", "redsync:node", "pending"}).integer == 0);
  }

  // Issue 26 §1: the guard measured the node's age as server time - since,
  // which a backward step left negative for the size of the step.
  TEST_CASE("a node whose clock is stepped back votes again one guard window later, not the step later") {
    clock_offset clk;
    clk.set(120s);
    redsync::test::redis_server node({.env = clk.env()});
    const std::vector<std::string> uris = {node.uri()};
    const auto name = unique_name("app:clock-back");
    constexpr auto window = 1000ms;
    {
      // Stamped while the node's clock is 120 s ahead.
      redsync::Redsync first(uris, guard_with_window(window));
      auto m = first.new_mutex(name, {.expiry = 500ms, .tries = 10000});
      auto r = m.lock(redsync::context::timeout(15s));
      REQUIRE_MESSAGE(r.ok(), r.describe());
      REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());
    }
    // As if repaired at that clock (a brand-new record is stamped as
    // verified since time 0, which no step moves into the future).
    redsync::test::stamp_record_now(node);
    clk.set(0ms);
    const auto stepped = clock_type::now();
    redsync::Redsync later(uris, guard_with_window(window));
    auto m =
        later.new_mutex(name, {.expiry = 500ms, .tries = 10000, .retry_delay = [](int) { return 50ms; }});
    auto r = m.lock(redsync::context::timeout(40s));
    const auto took = clock_type::now() - stepped;
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(took >= window);  // the window restarted: it did not vote at once
    CHECK(took < 40s);      // far less than the 120 s step
    CHECK(m.unlock(redsync::context::timeout(5s)).ok());
  }

  TEST_CASE(
      "a repair started while a node's clock was ahead completes about a repair delay after a step back") {
    // Every node's clock moves (one offset file); only node 2 loses its data.
    clock_offset clk;
    cluster nodes(3, {.env = clk.env()});
    prime_records(nodes.uris());
    const auto name = unique_name("app:clock-back-repair");
    constexpr auto expiry = 2000ms;
    clk.set(120s);
    nodes[2].restart();
    // The first client marks node 2 at its clock, 120 s ahead.
    CHECK_FALSE(short_lived_client_counts(nodes.uris(), name, expiry, 2));
    clk.set(0ms);
    const auto took = first_vote_of(nodes.uris(), name, expiry, 2, 300ms, 40s);
    REQUIRE_MESSAGE(took, "node 2 never voted again");
    CHECK(*took >= expiry);
  }

  // What a step of a node's wall clock does to the keys it holds (Redis
  // dates a PX key on the wall clock): a backward step makes it live longer
  // by the step; a forward step past its expiry removes it at once.
  TEST_CASE("a node's clock step moves its lock keys' expiry by the step; unlock still frees the lock") {
    clock_offset clk;
    redsync::test::redis_server node({.env = clk.env()});
    redis_client c(node);
    REQUIRE(c.command({"SET", "app:step-key", "v", "PX", "5000"}).str == "OK");
    prime_records({node.uri()});
    redsync::Redsync rs({node.uri()}, fresh_nodes());
    auto m = rs.new_mutex(unique_name("app:step-back"), {.expiry = 5s, .tries = 1});
    REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
    clk.set(-60s);
    CHECK(c.pttl("app:step-key") > 60000);
    CHECK(c.pttl(m.name()) > 60000);
    CHECK(m.unlock(redsync::context::timeout(5s)).ok());
    CHECK_FALSE(c.get(m.name()));
    clk.set(60s);
    CHECK_FALSE(c.get("app:step-key"));
  }

  TEST_CASE("a node's clock stepped forward lets it in before its guard window has passed") {
    clock_offset clk;
    redsync::test::redis_server node({.env = clk.env()});
    prime_records({node.uri()});
    redsync::test::stamp_record_now(node);  // repaired just now: the 60 s window applies
    redsync::Redsync rs({node.uri()}, guard_with_window(60s));
    auto m = rs.new_mutex(unique_name("app:step-guard"), {.expiry = 1s, .tries = 1});
    auto kept_out = m.lock(redsync::context::timeout(5s));
    REQUIRE_FALSE(kept_out.ok());
    REQUIRE(kept_out.nodes.size() == 1);
    CHECK(kept_out.nodes[0].status == redsync::node_status::excluded);
    clk.set(120s);
    auto let_in = m.lock(redsync::context::timeout(5s));
    CHECK_MESSAGE(let_in.ok(), let_in.describe());
  }

  TEST_CASE(
      "a node's clock stepped forward past a lock's expiry lets a second client take it (two holders)") {
    clock_offset clk;
    redsync::test::redis_server node({.env = clk.env()});
    prime_records({node.uri()});
    redsync::Redsync rs({node.uri()}, fresh_nodes());
    const auto name = unique_name("app:step-forward");
    auto first = rs.new_mutex(name, {.expiry = 30s, .tries = 1});
    REQUIRE(first.lock(redsync::context::timeout(5s)).ok());
    clk.set(60s);
    auto second = rs.new_mutex(name, {.expiry = 30s, .tries = 1});
    CHECK(second.lock(redsync::context::timeout(5s)).ok());
    CHECK(first.held());  // the first holder's validity is on its own clock
    CHECK(second.token() > first.token());
  }

  // Issue 21 §3: DEBUG RELOAD NOSAVE loads an older snapshot in place,
  // keeping run_id and replication id: the rolled-back record used to name
  // the server still, so the node voted at once with its lost keys.
  TEST_CASE("a node that loads an older snapshot in place does not vote until repaired; tokens keep rising") {
    cluster nodes(3, {.extra_args = {"--enable-debug-command", "yes"}});
    prime_records(nodes.uris());
    const auto name = unique_name("app:reload");
    REQUIRE(redis_client(nodes[0]).command({"SAVE"}).str == "OK");
    // Node 2 says no to the first holder, which wins on nodes 0 and 1.
    REQUIRE(redis_client(nodes[2]).command({"SET", name, "someone-else"}).str == "OK");
    redsync::Redsync a_rs(nodes.uris(), fresh_nodes());
    auto a = a_rs.new_mutex(name, {.expiry = 3000ms, .tries = 1});
    auto held = a.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(held.ok(), held.describe());
    REQUIRE(redis_client(nodes[2]).command({"DEL", name}).integer == 1);
    // Node 0 goes back to the snapshot: without the lock key and the counter
    // increments since.
    REQUIRE(redis_client(nodes[0]).command({"DEBUG", "RELOAD", "NOSAVE"}).str == "OK");
    REQUIRE_FALSE(redis_client(nodes[0]).get(name));

    redsync::Redsync b_rs(nodes.uris(), fresh_nodes());
    auto b = b_rs.new_mutex(name, {.expiry = 3000ms, .tries = 1});
    auto at_once = b.lock(redsync::context::timeout(5s));
    CHECK_MESSAGE(!at_once.ok(), "two holders: ", at_once.describe());
    REQUIRE(at_once.nodes.size() == 3);
    CHECK(at_once.nodes[0].status == redsync::node_status::excluded);
    if (at_once.ok()) return;
    // Later, once the first lock has expired, the lock is granted again with
    // a higher token.
    auto later =
        b_rs.new_mutex(name, {.expiry = 3000ms, .tries = 10000, .retry_delay = [](int) { return 50ms; }});
    auto r = later.lock(redsync::context::timeout(30s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(clock_type::now() > a.until());
    CHECK(later.token() > a.token());
  }
}

TEST_SUITE("repair") {
  // README (Safety, Clocks, the waiting line): a waiter's lease is dated on
  // the node's clock, so a step back by S keeps a crashed waiter at the head
  // of that node's line S longer; a single stepped node only refuses its
  // vote meanwhile, and the lock goes on with the others.
  TEST_CASE("a node stepped back keeps a crashed waiter at the head of its line, and only refuses its vote") {
    clock_offset clk;
    redsync::test::redis_server stepped({.env = clk.env()});
    redsync::test::redis_server b, c;
    const std::vector<std::string> uris = {stepped.uri(), b.uri(), c.uri()};
    prime_records(uris);
    redsync::Redsync rs(uris, fresh_nodes());
    const auto name = unique_name("app:line-step-back");
    const auto arrival = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
    // A waiter with a 1 s lease, which then crashed.
    for (redsync::test::redis_server* s : {&stepped, &b, &c}) {
      redis_client client(*s);
      auto t = client.command({"TIME"});
      const long long now_ms = std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
      client.command({"ZADD", name + ":redsync-line", std::to_string(arrival), "crashed-waiter"});
      client.command({"HSET", name + ":redsync-leases", "crashed-waiter", std::to_string(now_ms + 1000)});
      client.command({"PEXPIRE", name + ":redsync-line", "2000"});
      client.command({"PEXPIRE", name + ":redsync-leases", "2000"});
    }
    clk.set(-60s);
    const auto t0 = clock_type::now();
    auto m = rs.new_mutex(name, {.tries = 10000, .retry_delay = [](int) { return 50ms; }});
    auto r = m.lock(redsync::context::timeout(20s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(clock_type::now() - t0 < 1s + 5s);  // the lease on the other nodes, not the 60 s step
    CHECK(r.nodes[0].status != redsync::node_status::ok);
    CHECK(redis_client(stepped).command({"ZRANGE", name + ":redsync-line", "0", "0"}).elements.at(0).str ==
          "crashed-waiter");
    CHECK(m.unlock(redsync::context::timeout(5s)).ok());
  }
}
