// Fencing tokens and the restart guard under the failures that broke them:
// a node restarted empty or from a stale snapshot, a node replaced by another
// long-running server, many distinct names, and multi-name locks.

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// Another holder's key on node i, for as long as the test runs.
void occupy(redis_server& node, const std::string& name) {
  redis_client(node).command({"SET", name, "someone-else", "PX", "60000"});
}

void vacate(redis_server& node, const std::string& name) {
  redis_client(node).command({"DEL", name});
}

redsync::mutex_options quick_fencing(redsync::mutex_options o = {}) {
  o.retry_delay = [](int) { return 20ms; };
  return o;
}

// The Redsync of a long-running client: guard on, with a short expiry so
// the guard window is short too. Its records were stamped by
// prime_records(), so it waits out that window once.
redsync::Redsync guarded_client(const std::vector<std::string>& uris) {
  return redsync::Redsync(uris, redsync::redsync_options{.restart_guard = true});
}

void wait_for_votes(redsync::Redsync& rs, std::chrono::milliseconds expiry) {
  auto probe = rs.new_mutex(unique_name("probe"), {.expiry = expiry, .tries = 1});
  REQUIRE(wait_until(
      [&] {
        auto r = probe.lock(redsync::context{});
        if (r) (void)probe.unlock(redsync::context{});
        return r.ok() && r.nodes_with(redsync::node_status::excluded).empty();
      },
      10s));
}

}  // namespace

TEST_SUITE("fencing") {
  TEST_CASE("a token is above every earlier one after a node of the earlier quorum restarted empty") {
    // The scenario of the safety review: the earlier lock is won on nodes
    // 0, 1, 2 (3 and 4 are held by others, their counters stay behind), node
    // 2 restarts empty, and the next lock is won on 2, 3, 4.
    cluster c(5);
    prime_records(c.uris());
    const auto name = unique_name("fence-restart");
    auto rs = guarded_client(c.uris());
    wait_for_votes(rs, 300ms);

    occupy(c[3], name);
    occupy(c[4], name);
    auto first = rs.new_mutex(name, quick_fencing({.expiry = 300ms, .tries = 1}));
    auto r1 = first.lock(redsync::context{});
    REQUIRE_MESSAGE(r1.ok(), r1.describe());
    const auto t = first.token().value;
    REQUIRE(first.unlock(redsync::context{}).ok());
    vacate(c[3], name);
    vacate(c[4], name);

    c[2].restart();  // forgets its counter
    // Wait until node 2 votes again, with a probe that cannot win on 3 and 4
    // (so their counters stay behind, as in the review's scenario).
    const auto probe_name = unique_name("probe");
    occupy(c[3], probe_name);
    occupy(c[4], probe_name);
    auto probe = rs.new_mutex(probe_name, {.expiry = 300ms, .tries = 1});
    REQUIRE(wait_until(
        [&] {
          auto r = probe.lock(redsync::context{});
          if (r) (void)probe.unlock(redsync::context{});
          return r.ok() && r.nodes[2].status == redsync::node_status::ok;
        },
        10s));

    occupy(c[0], name);
    occupy(c[1], name);
    auto second = rs.new_mutex(name, {.expiry = 300ms, .tries = 1});
    auto r2 = second.lock(redsync::context{});  // won on 2, 3, 4 at the first attempt
    REQUIRE_MESSAGE(r2.ok(), r2.describe());
    CHECK(r2.nodes[2].status == redsync::node_status::ok);
    CHECK(second.token().value > t);
  }

  TEST_CASE("a token is above every earlier one after a node came back from a stale snapshot") {
    cluster c(5);
    prime_records(c.uris());
    const auto name = unique_name("fence-snapshot");
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(name, quick_fencing({.expiry = 2s}));
    REQUIRE(m.lock(redsync::context{}).ok());
    REQUIRE(m.unlock(redsync::context{}).ok());
    // Node 2 saves a snapshot now, then serves ten more locks.
    REQUIRE(redis_client(c[2]).command({"SAVE"}).str == "OK");
    for (int i = 0; i < 10; ++i) {
      REQUIRE(m.lock(redsync::context{}).ok());
      REQUIRE(m.unlock(redsync::context{}).ok());
    }
    occupy(c[3], name);
    occupy(c[4], name);
    REQUIRE(m.lock(redsync::context{}).ok());  // won on 0, 1, 2
    const auto t = m.token().value;
    REQUIRE(m.unlock(redsync::context{}).ok());
    vacate(c[3], name);
    vacate(c[4], name);

    c[2].restart();  // loads the old snapshot: its counter is ten locks behind
    REQUIRE(redis_client(c[2]).command({"HGET", "redsync:node", "fence"}).type ==
            redis_client::reply::kind::string);
    occupy(c[0], name);
    occupy(c[1], name);
    auto next = rs.new_mutex(name, quick_fencing({.expiry = 2s, .tries = 100}));
    auto r = next.lock(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(next.token().value > t);
  }

  TEST_CASE("locking many distinct names leaves no key per name once they are released") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    for (int i = 0; i < 150; ++i) {
      auto m = rs.new_mutex(unique_name("order"));
      REQUIRE(m.lock(redsync::context{}).ok());
      REQUIRE(m.unlock(redsync::context{}).ok());
    }
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client client(c[i]);
      CHECK(client.dbsize() == 1);
      CHECK(client.exists("redsync:node"));
    }
  }

  TEST_CASE("a multi-name lock's token is above every earlier token of each of its names") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto a = unique_name("multi-a");
    const auto b = unique_name("multi-b");
    std::uint64_t highest = 0;
    for (int i = 0; i < 3; ++i) {
      auto m = rs.new_mutex(b);
      REQUIRE(m.lock(redsync::context{}).ok());
      highest = std::max(highest, m.token().value);
      REQUIRE(m.unlock(redsync::context{}).ok());
    }
    auto both = rs.new_multi_mutex({a, b});
    REQUIRE(both.lock(redsync::context{}).ok());
    CHECK(both.token().value > highest);
    REQUIRE(both.unlock(redsync::context{}).ok());
  }

  TEST_CASE("{a, b} and {b, a} are the same lock and share the waiting lines") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto a = unique_name("order-a");
    const auto b = unique_name("order-b");
    auto holder = rs.new_multi_mutex({a, b});
    auto waiter = rs.new_multi_mutex({b, a});
    CHECK(holder.names() == waiter.names());
    REQUIRE(holder.lock(redsync::context{}).ok());

    auto waited = std::async(std::launch::async, [&] { return waiter.lock(redsync::context::timeout(10s)); });
    // The waiter stands in the line of both names.
    REQUIRE(wait_until(
        [&] {
          redis_client client(c[0]);
          return client.command({"ZCARD", a + ":redsync-line"}).integer == 1 &&
                 client.command({"ZCARD", b + ":redsync-line"}).integer == 1;
        },
        5s));
    REQUIRE(holder.unlock(redsync::context{}).ok());
    // A newcomer in the other order does not jump the line.
    auto newcomer = rs.new_multi_mutex({a, b}, {.tries = 1});
    auto r = newcomer.try_lock(redsync::context{});
    CHECK_FALSE(r.ok());
    CHECK(waited.get().ok());
    CHECK(waiter.unlock(redsync::context{}).ok());
  }

  TEST_CASE("releasing a multi-name lock wakes the waiters of every name, not only the first") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto a = unique_name("wake-a");
    const auto b = unique_name("wake-b");
    auto holder = rs.new_multi_mutex({a, b});
    REQUIRE(holder.lock(redsync::context{}).ok());
    // Without a wake-up this waiter would sleep 10 s between attempts.
    // (Several tries: a wake-up from the fastest node can come before the
    // release reached the others; every node's announcement wakes it again.)
    auto waiter = rs.new_mutex(b, {.tries = 10, .retry_delay = [](int) { return 10s; }});
    auto waited = std::async(std::launch::async, [&] { return waiter.lock(redsync::context::timeout(30s)); });
    // In line and subscribed to its channel for b's releases on every node.
    REQUIRE(wait_until(
        [&] {
          for (std::size_t i = 0; i < c.size(); ++i) {
            if (waiter_channels(c[i], "redsync:release:" + b) != 1) return false;
          }
          return redis_client(c[0]).command({"ZCARD", b + ":redsync-line"}).integer == 1;
        },
        5s));
    const auto released_at = clock_type::now();
    REQUIRE(holder.unlock(redsync::context{}).ok());
    REQUIRE(waited.wait_for(5s) == std::future_status::ready);
    CHECK(waited.get().ok());
    CHECK(clock_type::now() - released_at < 5s);
    CHECK(waiter.unlock(redsync::context{}).ok());
  }

  // One lock attempt of `b` that reached node 2: right after the kill, a
  // client's connection to that port may still be reconnecting (seen twice
  // on loaded machines: node 2 `unreachable`, which says nothing about the
  // replacement's vote). An attempt that wins ends the loop too, so a wrong
  // yes from node 2 is still seen by the checks after it.
  redsync::result attempt_once_reconnected(redsync::Mutex & b) {
    redsync::result r;
    const bool reached = wait_until(
        [&] {
          r = b.lock(redsync::context{});
          return r.ok() || r.nodes.size() < 3 || r.nodes[2].status != redsync::node_status::unreachable;
        },
        10s);
    CHECK_MESSAGE(reached, "node 2 stayed unreachable: ", r.describe());
    return r;
  }

  TEST_CASE("a node replaced by another long-running server does not vote while the lock is held") {
    cluster c(5);
    prime_records(c.uris());
    // The replacement: a server that has been up longer than the guard
    // window, with its own run_id and no keys.
    redis_server replacement;
    const auto name = unique_name("replaced");
    // The holder's own guard window is short, so it can lock soon after the
    // records were stamped; what matters is the second client's.
    redsync::Redsync holder_rs(c.uris(), {.restart_guard = true, .restart_guard_window = 1s});
    wait_for_votes(holder_rs, 2s);
    occupy(c[3], name);
    occupy(c[4], name);
    auto holder = holder_rs.new_mutex(name, {.expiry = 4s, .tries = 1});
    // On nodes 0, 1, 2, once they have been verified for longer than the
    // holder's own expiry (the window grows with the longest expiry used).
    REQUIRE(wait_until([&] { return holder.lock(redsync::context{}).ok(); }, 8s));
    vacate(c[3], name);
    vacate(c[4], name);
    // A client that met node 2 before the replacement.
    auto known_rs = guarded_client(c.uris());
    wait_for_votes(known_rs, 1s);
    REQUIRE(wait_until(
        [&] { return std::stoi(redis_client(replacement).info_field("server", "uptime_in_seconds")) >= 2; },
        5s));

    const int port = c[2].port();
    c[2].kill();
    REQUIRE(redis_client(replacement).command({"CONFIG", "SET", "port", std::to_string(port)}).str == "OK");
    REQUIRE(holder.held());

    SUBCASE("a client that met the old server") {
      auto b = known_rs.new_mutex(name, {.expiry = 1s, .tries = 1});
      const auto r = attempt_once_reconnected(b);
      CHECK_FALSE(r.ok());
      CHECK(r.nodes[2].status == redsync::node_status::excluded);
    }
    SUBCASE("a client that never met the old server") {
      auto new_rs = guarded_client(c.uris());
      auto b = new_rs.new_mutex(name, {.expiry = 1s, .tries = 1});
      const auto r = attempt_once_reconnected(b);
      CHECK_FALSE(r.ok());
      CHECK(r.nodes[2].status == redsync::node_status::excluded);
    }
    CHECK(holder.held());
  }

  TEST_CASE("the restart guard window can be set longer than this client's own expiries") {
    cluster c(3);
    prime_records(c.uris());
    stamp_records_now(c);
    redsync::Redsync rs(c.uris(), {.restart_guard = true, .restart_guard_window = 1500ms});
    auto m = rs.new_mutex(unique_name("window"), quick_fencing({.expiry = 200ms, .tries = 1}));
    const auto started = clock_type::now();
    auto r = m.lock(redsync::context{});
    // Stamped by prime_records() moments ago: a 200 ms expiry alone would
    // let the nodes vote by now, the 1.5 s window does not.
    REQUIRE_FALSE(r.ok());
    CHECK(r.nodes_with(redsync::node_status::excluded).size() == 3);
    CHECK(r.nodes[0].message.find("guard window (1500 ms)") != std::string::npos);
    REQUIRE(wait_until([&] { return m.try_lock(redsync::context{}).ok(); }, 5s));
    CHECK(clock_type::now() - started >= 1000ms);
  }

  TEST_CASE("a node that may evict keys, or is a replica, does not vote, and says why") {
    cluster c(3);
    prime_records(c.uris());
    redsync::Redsync rs(c.uris(), fresh_nodes());
    SUBCASE("an eviction policy with a memory limit") {
      redis_client(c[0]).command({"CONFIG", "SET", "maxmemory", "1gb"});
      redis_client(c[0]).command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
      auto m = rs.new_mutex(unique_name("evicting"));
      auto r = m.lock(redsync::context{});
      REQUIRE(r.ok());  // 1 and 2 make the quorum
      CHECK(r.nodes[0].status == redsync::node_status::excluded);
      CHECK(r.nodes[0].message.find("maxmemory-policy allkeys-lru") != std::string::npos);
    }
    SUBCASE("a replica of another server") {
      redis_server other;
      redis_client(c[0]).command({"REPLICAOF", "127.0.0.1", std::to_string(other.port())});
      auto m = rs.new_mutex(unique_name("replica"));
      auto r = m.lock(redsync::context{});
      // A replica refuses writes (READONLY) or, once its INFO was read on a
      // new connection, is excluded: either way it never counts.
      CHECK(r.nodes[0].status != redsync::node_status::ok);
      redsync::Redsync fresh(c.uris(), fresh_nodes());
      auto m2 = fresh.new_mutex(unique_name("replica"));
      auto r2 = m2.lock(redsync::context{});
      CHECK(r2.nodes[0].status != redsync::node_status::ok);
    }
  }

  TEST_CASE(
      "a node that loses its data while an acquisition that counted it is in flight is repaired after it") {
    // From the attacker review: n0's counter is ahead, A's round counts n0's
    // answer T and waits on a frozen n4; n0 is flushed; B meets n0. If B
    // repaired n0 at once from counters read before A's write-back, a later
    // lock on n0, n3, n4 would get a token below T.
    cluster c(5);
    prime_records(c.uris());
    const redsync::redsync_options guarded{.restart_guard = true, .restart_guard_window = 2500ms};
    redsync::Redsync a_rs(c.uris(), guarded);
    wait_for_votes(a_rs, 200ms);

    // Ordinary contention leaves n0's counter ahead of the others'.
    const auto p = unique_name("ahead");
    for (std::size_t i = 1; i < 5; ++i) occupy(c[i], p);
    auto pm = a_rs.new_mutex(p, {.expiry = 200ms, .tries = 1});
    for (int i = 0; i < 10; ++i) REQUIRE_FALSE(pm.try_lock(redsync::context{}).ok());
    for (std::size_t i = 1; i < 5; ++i) vacate(c[i], p);

    const auto name = unique_name("in-flight-loss");
    occupy(c[3], name);
    c[4].pause();  // A's round waits out its 1 s command timeout on n4
    auto am = a_rs.new_mutex(name, {.expiry = 2s, .tries = 1, .timeout_factor = 0.5});
    auto fut = std::async(std::launch::async, [&] { return am.lock(redsync::context{}); });
    REQUIRE(wait_until(
        [&] {
          return redis_client(c[0]).exists(name) && redis_client(c[1]).exists(name) &&
                 redis_client(c[2]).exists(name);
        },
        2s));
    redis_client(c[0]).flushall();
    redsync::Redsync b_rs(c.uris(), guarded);
    auto bm = b_rs.new_mutex(name, {.expiry = 200ms, .tries = 1});
    if (bm.try_lock(redsync::context{})) (void)bm.unlock(redsync::context{});  // meets n0: starts its repair
    auto ra = fut.get();
    REQUIRE_MESSAGE(ra.ok(), ra.describe());
    const auto t = am.token().value;
    c[4].resume();
    REQUIRE(am.unlock(redsync::context{}).ok());
    vacate(c[3], name);

    // Once n0 is repaired and past its guard window, a lock won on n0, n3
    // and n4 (n1 and n2 busy) gets a token above T.
    REQUIRE(wait_until(
        [&] {
          redis_client n0(c[0]);
          auto since = n0.command({"HGET", "redsync:node", "since"});
          if (since.type != redis_client::reply::kind::string) {
            if (bm.try_lock(redsync::context{}))
              (void)bm.unlock(redsync::context{});  // keep the repair going
            return false;
          }
          auto now = n0.command({"TIME"});
          const long long now_ms =
              std::stoll(now.elements[0].str) * 1000 + std::stoll(now.elements[1].str) / 1000;
          return now_ms - std::stoll(since.str) > 2600;
        },
        15s));
    occupy(c[1], name);
    occupy(c[2], name);
    // A per-node timeout of half the expiry: the default 5 % (10 ms) is
    // shorter than a loaded sanitizer build's round trip.
    auto cm = b_rs.new_mutex(name, {.expiry = 200ms, .tries = 1, .timeout_factor = 0.5});
    auto rc = cm.try_lock(redsync::context{});
    REQUIRE_MESSAGE(rc.ok(), rc.describe());
    CHECK(cm.token().value > t);
  }

  TEST_CASE("a client with a short expiry keeps a node out for the longest expiry recorded by any client") {
    cluster c(3);
    prime_records(c.uris());
    stamp_records_now(c);  // stamps every node now
    {
      // Another client locks once with a 3 s expiry: the nodes record it.
      redsync::Redsync other(c.uris(), fresh_nodes());
      auto m = other.new_mutex(unique_name("long"), {.expiry = 3s});
      REQUIRE(m.lock(redsync::context{}).ok());
      REQUIRE(m.unlock(redsync::context{}).ok());
    }
    redsync::Redsync rs(c.uris());  // guard on; its own expiry is only 100 ms
    // Half the expiry per node: the default 5 ms would turn a loaded
    // machine's slow answer into a timeout instead of the exclusion tested.
    auto m = rs.new_mutex(unique_name("short"), {.expiry = 100ms, .tries = 1, .timeout_factor = 0.5});
    auto r = m.lock(redsync::context{});
    REQUIRE_FALSE(r.ok());
    CHECK(r.nodes_with(redsync::node_status::excluded).size() == 3);
    CHECK(r.nodes[0].message.find("guard window (3000 ms)") != std::string::npos);
  }

  TEST_CASE("a node whose data was replaced by a resync (same run_id, new replication id) does not vote") {
    cluster c(3);
    prime_records(c.uris());
    // A copy of node 0 (its record included) made now, then synced back
    // onto node 0 and detached: node 0 keeps its run_id, but its data (and
    // replication id) come from elsewhere.
    redis_server copy;
    const auto linked = [](redis_server& s) {
      return redis_client(s).info_field("replication", "master_link_status") == "up";
    };
    redis_client(copy).command({"REPLICAOF", "127.0.0.1", std::to_string(c[0].port())});
    REQUIRE(wait_until([&] { return linked(copy); }, 10s));
    redis_client(copy).command({"REPLICAOF", "NO", "ONE"});
    const auto run_id = redis_client(c[0]).info_field("server", "run_id");
    redis_client(c[0]).command({"REPLICAOF", "127.0.0.1", std::to_string(copy.port())});
    REQUIRE(wait_until([&] { return linked(c[0]); }, 10s));
    redis_client(c[0]).command({"REPLICAOF", "NO", "ONE"});
    REQUIRE(redis_client(c[0]).info_field("server", "run_id") == run_id);

    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("resynced"), {.tries = 1});
    auto r = m.lock(redsync::context{});
    REQUIRE(r.ok());  // nodes 1 and 2
    CHECK(r.nodes[0].status == redsync::node_status::excluded);
    CHECK(r.nodes[0].message.find("not verified for this server") != std::string::npos);
  }
}
