// The fair waiting line under the failures that used to stall it: a head of
// the line that crashed, waiters cut off from the majority, and a client
// whose clock is behind the others'.

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

long long server_ms(redis_client& client) {
  auto t = client.command({"TIME"});
  return std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
}

// Puts `who` in the line of `name` on every node with the given arrival
// (µs) and a lease of `lease`, as a waiter that then vanished would leave it.
void stand_in_line(cluster& c, const std::string& name, const std::string& who, long long arrival,
                   std::chrono::milliseconds lease) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    redis_client client(c[i]);
    const auto until = server_ms(client) + lease.count();
    // One transaction: a live waiter's script evicts a place in line that
    // has no lease yet, so the place and its lease must appear together.
    client.command({"MULTI"});
    client.command({"ZADD", name + ":redsync-line", std::to_string(arrival), who});
    client.command({"HSET", name + ":redsync-leases", who, std::to_string(until)});
    client.command({"PEXPIRE", name + ":redsync-line", std::to_string(2 * lease.count())});
    client.command({"PEXPIRE", name + ":redsync-leases", std::to_string(2 * lease.count())});
    REQUIRE(client.command({"EXEC"}).elements.size() == 4);
  }
}

long long wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEST_SUITE("line") {
  TEST_CASE(
      "a crashed head of the line holds up a free lock until its lease runs out, and then loses its place") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("crashed-head");
    // A head with a 1.5 s lease (about what a head waiting with the default
    // retry delay takes), which then crashed.
    stand_in_line(c, name, "crashed-waiter", wall_us(), 1500ms);
    auto m = rs.new_mutex(name);
    const auto t0 = clock_type::now();
    CHECK(m.try_lock(redsync::context{}).busy());  // a live head would be on its way
    REQUIRE(wait_until([&] { return m.try_lock(redsync::context{}).ok(); }, 10s));
    // Its lease, plus generous room for a loaded machine.
    CHECK(clock_type::now() - t0 < 1500ms + 3s);
    // Gone from the line on every node the lock was taken on.
    int evicted = 0;
    for (std::size_t i = 0; i < c.size(); ++i)
      evicted += redis_client(c[i]).command({"ZSCORE", name + ":redsync-line", "crashed-waiter"}).type !=
                 redis_client::reply::kind::string;
    CHECK(evicted >= 2);
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a release reserves the lock for the head for as long as the line lives, not longer") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("vanished-head");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    // A waiter with a 1.5 s lease crashed while the lock was held.
    stand_in_line(c, name, "vanished-waiter", wall_us(), 1500ms);
    REQUIRE(holder.unlock(redsync::context{}).ok());
    // The release reserved every key for it, until its line expires.
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client client(c[i]);
      const auto v = client.get(name);
      REQUIRE(v);
      CHECK(*v == std::string("\0redsync:next\0vanished-waiter", 29));
      // Set from the line's TTL at the release (read here a moment apart).
      CHECK(client.pttl(name) <= client.pttl(name + ":redsync-line") + 50);
      CHECK(client.pttl(name) <= 3000);  // stand_in_line's line TTL: twice the lease
    }
    // A newcomer gets the lock once the lease ran out, not before.
    auto newcomer = rs.new_mutex(name);
    const auto t0 = clock_type::now();
    auto r = newcomer.lock(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(clock_type::now() - t0 < 1500ms + 3s);
    CHECK(newcomer.token().value > holder.token().value);
    CHECK(newcomer.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a live waiter behind a vanished head gets the lock once the head's lease ran out") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("second-in-line");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    // A head that arrived a second earlier and then vanished, and a live
    // waiter behind it retrying every 20 ms.
    stand_in_line(c, name, "vanished-head", wall_us() - 1'000'000, 1500ms);
    const auto lease_start = clock_type::now();
    auto live = rs.new_mutex(name, {.tries = 100000, .retry_delay = [](int) { return 20ms; }});
    auto f = live.lock_future(redsync::context::timeout(20s));
    REQUIRE(wait_until(
        [&] {
          return redis_client(c[0]).command({"ZCARD", name + ":redsync-line"}).integer == 2;
        },
        3s));
    REQUIRE(holder.unlock(redsync::context{}).ok());
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    auto r = f.get();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    // The waiter behind the head refreshes its place at least every second:
    // it notices the head is gone within a second of its lease's end.
    CHECK(clock_type::now() - lease_start < 1500ms + 1s + 2s);
    CHECK(live.unlock(redsync::context{}).ok());
  }

  TEST_CASE(
      "a multi-name waiter at the head of a free name's line is not overtaken by a newcomer's transaction") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto a = unique_name("multi-head-a"), b = unique_name("multi-head-b");
    auto holder = rs.new_mutex(a);
    REQUIRE(holder.lock(redsync::context{}).ok());  // rs learns every node's window: transactions from now on
    auto probe = rs.new_mutex(b);
    REQUIRE(probe.lock(redsync::context{}).ok());
    REQUIRE(probe.unlock(redsync::context{}).ok());
    // The multi-name waiter heads b's line (b is free) but waits for a.
    auto multi = rs.new_multi_mutex({a, b}, {.tries = 100000, .retry_delay = [](int) { return 20ms; }});
    auto multi_done = multi.lock_future(redsync::context::timeout(20s));
    REQUIRE(wait_until([&] { return line_on_every_node(c, b, 1); }, 3s));
    // b is reserved for it (rule R), so a newcomer's SET NX on b fails...
    auto newcomer = rs.new_mutex(b, {.tries = 100000, .retry_delay = [](int) { return 20ms; }});
    auto newcomer_done = newcomer.lock_future(redsync::context::timeout(20s));
    // ...and it waits behind the multi-name waiter.
    REQUIRE(wait_until([&] { return line_on_every_node(c, b, 2); }, 3s));
    CHECK(newcomer_done.wait_for(200ms) == std::future_status::timeout);
    REQUIRE(holder.unlock(redsync::context{}).ok());
    REQUIRE(multi_done.wait_for(10s) == std::future_status::ready);
    auto rm = multi_done.get();
    REQUIRE_MESSAGE(rm.ok(), rm.describe());
    CHECK(newcomer_done.wait_for(200ms) == std::future_status::timeout);
    REQUIRE(multi.unlock(redsync::context{}).ok());
    REQUIRE(newcomer_done.wait_for(10s) == std::future_status::ready);
    auto rn = newcomer_done.get();
    REQUIRE_MESSAGE(rn.ok(), rn.describe());
    CHECK(newcomer.token().value > multi.token().value);
    CHECK(newcomer.unlock(redsync::context{}).ok());
  }

  TEST_CASE(
      "a reservation reads as expired to valid(), extend() and unlock() alike, and extend never overwrites "
      "it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("reservation-reads");
    auto a = rs.new_mutex(name, {.expiry = 1000ms, .tries = 1, .set_nx_on_extend = true});
    REQUIRE(a.lock(redsync::context{}).ok());
    REQUIRE(wait_until(
        [&] {
          for (std::size_t i = 0; i < c.size(); ++i)
            if (redis_client(c[i]).exists(name)) return false;
          return true;
        },
        3s));
    // Another holder takes the name and releases it to a waiter.
    auto b = rs.new_mutex(name);
    REQUIRE(b.lock(redsync::context{}).ok());
    stand_in_line(c, name, "waiter", wall_us(), 30s);
    REQUIRE(b.unlock(redsync::context{}).ok());
    CHECK(a.valid(redsync::context{}).error == redsync::errc::expired);
    CHECK(a.extend(redsync::context{}).error == redsync::errc::expired);
    for (std::size_t i = 0; i < c.size(); ++i) {
      const auto v = redis_client(c[i]).get(name);
      REQUIRE(v);
      CHECK(v->rfind(std::string("\0redsync:next\0", 14), 0) == 0);  // still the waiter's
    }
    CHECK(a.unlock(redsync::context{}).error == redsync::errc::expired);
  }

  TEST_CASE("a fail_fast waiter keeps its place in line while only a bare quorum of nodes answers") {
    // Node 2 is down, so a fail_fast attempt reports as soon as node 2's
    // "unreachable" (at once: the pool is backing off) and the first "taken"
    // make a quorum impossible: node 1's answer is not awaited. That node is
    // unknown, not unreachable: the waiter reaches a quorum (nodes 0 and 1)
    // and must keep its place ahead of later arrivals.
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("ff-bare-quorum");
    const auto line = name + ":redsync-line";
    auto holder = rs.new_mutex(name, {.expiry = 10s});
    REQUIRE(holder.lock(redsync::context{}).ok());
    c[2].kill();

    std::mutex mu;
    std::vector<std::string> order;
    const auto every_50ms = [](int) { return 50ms; };
    const auto take_turn = [&](redsync::Mutex& m) {
      auto r = m.lock(redsync::context::timeout(20s));
      if (!r.ok()) return r;
      {
        std::lock_guard lk(mu);
        order.push_back(m.value());
      }
      std::this_thread::sleep_for(20ms);
      (void)m.unlock(redsync::context{});
      return r;
    };
    auto w = rs.new_mutex(name, {.tries = 100000, .retry_delay = every_50ms, .fail_fast = true});
    auto w_done = std::async(std::launch::async, [&] { return take_turn(w); });
    // W has made several attempts before anyone else arrives.
    redis_client n0(c[0]);
    n0.reset_stats();
    REQUIRE(wait_until([&] { return n0.calls("evalsha") >= 4; }, 5s));

    std::vector<redsync::Mutex> later;
    std::vector<std::future<redsync::result>> later_done;
    later.reserve(4);
    for (int i = 0; i < 4; ++i) {
      later.push_back(rs.new_mutex(name, {.tries = 100000, .retry_delay = every_50ms}));
      auto& m = later.back();
      later_done.push_back(std::async(std::launch::async, [&] { return take_turn(m); }));
      // The next one arrives only once this one is in line.
      REQUIRE(wait_until(
          [&] {
            return n0.command({"ZSCORE", line, m.value()}).type == redis_client::reply::kind::string;
          },
          5s));
    }
    // W, the earliest waiter, is in line on both nodes that answer.
    for (std::size_t i = 0; i < 2; ++i)
      CHECK_MESSAGE(
          redis_client(c[i]).command({"ZSCORE", line, w.value()}).type == redis_client::reply::kind::string,
          "W is not in line on node ", i);

    REQUIRE(holder.unlock(redsync::context{}).ok());
    auto rw = w_done.get();
    CHECK_MESSAGE(rw.ok(), rw.describe());
    for (auto& f : later_done) CHECK(f.get().ok());
    REQUIRE(order.size() == 5);
    const auto w_at = std::find(order.begin(), order.end(), w.value()) - order.begin();
    CHECK_MESSAGE(w_at == 0, "W was served after ", w_at, " later arrivals");
  }

  TEST_CASE("waiters cut off from the majority do not deny a healthy client its quorum") {
    cluster c(5);
    prime_records(c.uris());
    const auto name = unique_name("cut-off");
    // Nothing listens on these ports: refused at once. Distinct ones, as a
    // node list may not name one server twice.
    const auto nowhere = [](int port) { return "redis://127.0.0.1:" + std::to_string(port); };
    auto u = c.uris();
    // B reaches only nodes 0 and 1, C only node 2; both wait for the lock.
    redsync::Redsync healthy(u, fresh_nodes());
    redsync::Redsync cut_b({u[0], u[1], nowhere(1), nowhere(2), nowhere(3)}, fresh_nodes());
    redsync::Redsync cut_c({nowhere(1), nowhere(2), u[2], nowhere(3), nowhere(4)}, fresh_nodes());
    auto holder = healthy.new_mutex(name, {.expiry = 10s});
    REQUIRE(holder.lock(redsync::context{}).ok());

    const auto every_50ms = [](int) { return 50ms; };
    auto b = cut_b.new_mutex(name, {.tries = 1000, .retry_delay = every_50ms});
    auto cm = cut_c.new_mutex(name, {.tries = 1000, .retry_delay = every_50ms});
    std::stop_source stop;
    auto b_done = std::async(std::launch::async,
                             [&] { return b.lock(redsync::context::timeout(10s).with(stop.get_token())); });
    auto c_done = std::async(std::launch::async,
                             [&] { return cm.lock(redsync::context::timeout(10s).with(stop.get_token())); });
    // Both have made several attempts by now.
    redis_client n0(c[0]), n2(c[2]);
    n0.reset_stats();
    n2.reset_stats();
    REQUIRE(wait_until([&] { return n0.calls("evalsha") >= 4 && n2.calls("evalsha") >= 4; }, 5s));
    CHECK(n0.command({"ZCARD", name + ":redsync-line"}).integer == 0);
    CHECK(n2.command({"ZCARD", name + ":redsync-line"}).integer == 0);

    REQUIRE(holder.unlock(redsync::context{}).ok());
    auto a = healthy.new_mutex(name, {.tries = 10, .retry_delay = every_50ms});
    auto r = a.lock(redsync::context::timeout(5s));
    CHECK_MESSAGE(r.ok(), r.describe());
    stop.request_stop();
    CHECK_FALSE(b_done.get().ok());
    CHECK_FALSE(c_done.get().ok());
    if (r) CHECK(a.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a fail_fast waiter cut off from the majority still leaves the line") {
    // W reaches node 0 only: node 2 refuses at once, node 1 never answers.
    // A fail_fast report does not await node 1 (unknown), so W keeps its
    // place for one attempt; the next awaits node 1's timeout and W leaves.
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("ff-cut-off");
    tcp_proxy stalled(c[1].port());
    stalled.stall();
    redsync::Redsync healthy(c.uris(), fresh_nodes());
    redsync::Redsync cut(
        {c[0].uri(), "redis://127.0.0.1:" + std::to_string(stalled.port()), "redis://127.0.0.1:1"},
        fresh_nodes());
    auto holder = healthy.new_mutex(name, {.expiry = 10s});
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto w = cut.new_mutex(name, {.tries = 1000, .retry_delay = [](int) { return 50ms; }, .fail_fast = true});
    std::stop_source stop;
    auto w_done = std::async(std::launch::async,
                             [&] { return w.lock(redsync::context::timeout(20s).with(stop.get_token())); });
    redis_client n0(c[0]);
    n0.reset_stats();
    const auto in_line = [&] { return n0.command({"ZCARD", name + ":redsync-line"}).integer; };
    // W joins with its first attempt, and leaves after the second (which
    // awaits node 1's timeout). The leave's script may reach node 0 after
    // the next attempt's (its first EVALSHA there is answered NOSCRIPT, and
    // the EVAL goes out after that attempt), so W's absence is awaited.
    REQUIRE(wait_until([&] { return n0.calls("evalsha") >= 5; }, 10s));
    CHECK(wait_until([&] { return in_line() == 0; }, 5s));
    // And it stays out over its next attempts: each fail_fast one keeps its
    // (lack of a) place, each awaiting one confirms it cannot reach a quorum.
    const auto seen = n0.calls("evalsha");
    REQUIRE(wait_until(
        [&] {
          CHECK(in_line() == 0);
          return n0.calls("evalsha") >= seen + 4;
        },
        10s));
    stop.request_stop();
    CHECK_FALSE(w_done.get().ok());
    CHECK(holder.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a client whose clock is behind goes ahead of earlier waiters; absent, it costs them its lease") {
    // The line is ordered by each waiter's wall-clock arrival (the same
    // number on every node, so nodes agree on the head). A client whose
    // clock is 5 s behind is ranked as if it had come 5 s earlier: this is
    // the documented limit of the line's fairness. Mutual exclusion and
    // fencing do not depend on the line.
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("skew");
    auto holder = rs.new_mutex(name, {.expiry = 10s});
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto waiter = rs.new_mutex(name, {.tries = 100, .retry_delay = [](int) { return 50ms; }});
    auto waited = std::async(std::launch::async, [&] { return waiter.lock(redsync::context::timeout(10s)); });
    REQUIRE(wait_until(
        [&] {
          return redis_client(c[0]).command({"ZCARD", name + ":redsync-line"}).integer == 1;
        },
        5s));
    // What a client with a slow clock writes when it joins now.
    stand_in_line(c, name, "slow-clock-client", wall_us() - 5'000'000, 1s);
    CHECK(redis_client(c[0]).command({"ZRANGE", name + ":redsync-line", "0", "0"}).elements.at(0).str ==
          "slow-clock-client");
    const auto released = clock_type::now();
    REQUIRE(holder.unlock(redsync::context{}).ok());
    REQUIRE(waited.wait_for(5s) == std::future_status::ready);
    CHECK(waited.get().ok());
    // It was served only once the absent head's lease had run out.
    CHECK(clock_type::now() - released >= 300ms);
    CHECK(waiter.unlock(redsync::context{}).ok());
  }
}
