// Adversarial review of the counting semaphore (include/redsync/semaphore.hpp)
// against real redis-servers. Each test states the attack; a test that
// shows a bug still present is marked may_fail, with the bug named in its
// comment, so the suite stays green until the lead fixes it.

#include "drop_at_shutdown.hpp"
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
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

std::vector<std::string> first(const std::vector<std::string>& uris, std::size_t n) {
  return {uris.begin(), uris.begin() + static_cast<std::ptrdiff_t>(n)};
}

// A stand-in holder's permit of a k = 1 semaphore on `nodes`, expiring far
// in the future (another client's, as far as any attempt can tell).
void plant_foreign_permit(cluster& c, const std::string& name, std::initializer_list<std::size_t> nodes) {
  const std::string set = "redsync:sem:{" + name + "}";
  for (std::size_t i : nodes) {
    redis_client cl(c[i]);
    cl.command({"ZADD", set, "99999999999999", "0:someone-else"});
    cl.command({"SET", set + ":permits", "1"});
  }
}

}  // namespace

TEST_SUITE("semaphore attack") {
  // Was a known availability hole: the undo of a failed attempt was quiet,
  // so a waiter refused because of a grant that was then undone slept its
  // whole retry delay while the permit was free. An attempt made on the
  // client's own schedule now announces its undo (the next test pins the
  // rule that keeps that from chaining).
  TEST_CASE("a waiter refused by a failed attempt's grant is woken once that grant is undone") {
    cluster c(3);
    prime_records(c.uris());
    redsync::test::stamp_records_now(c);  // as if repaired now: a guarded client excludes them
    const auto name = unique_name("sem-attack-quiet-undo");
    // X: the restart guard on with a long window, so its yeses never count
    // (the records were stamped a moment ago) and its attempts always fail.
    redsync::Redsync rx(c.uris(), {.restart_guard = true, .restart_guard_window = 60s});
    auto x = rx.new_semaphore(name, 1, {.expiry = 20s, .tries = 1, .timeout_factor = 0.2});
    // W: an ordinary waiter with a long retry delay (as in semaphore_test's
    // wake test), which only a wake-up can shorten.
    redsync::Redsync rw(c.uris(), fresh_nodes());
    auto w = rw.new_semaphore(
        name, 1, {.expiry = 20s, .tries = 2, .retry_delay = [](int) { return 20s; }, .timeout_factor = 0.05});
    // Node 2 paused: every round waits its per-node timeout there, 4 s for
    // X, so X's grants on nodes 0 and 1 stay live for 4 s, while W's rounds
    // (1 s) are refused by them.
    c[2].pause();
    auto xf = x.try_acquire_future();
    redis_client n0(c[0]);
    redis_client n1(c[1]);
    REQUIRE(wait_until([&] { return permits_on(n0, name) == 1 && permits_on(n1, name) == 1; }, 10s));
    const auto before = script_calls(n0);
    auto wf = w.acquire_future(redsync::context::timeout(40s));
    // W's first attempt was refused by X's grants on nodes 0 and 1.
    REQUIRE(wait_until([&] { return script_calls(n0) > before; }, 10s));
    auto xr = xf.get();
    REQUIRE_MESSAGE(!xr.ok(), xr.describe());  // excluded by the guard: undone
    // X's undo frees nodes 0 and 1, a quorum for k = 1, and wakes W there (W
    // may hold the permit on them by the time we look, so we do not).
    const auto freed = clock_type::now();
    // The semaphore is free on a quorum: W should get it well before its
    // 20 s retry delay.
    const bool got_soon = wf.wait_for(8s) == std::future_status::ready;
    CHECK_MESSAGE(
        got_soon,
        "the waiter slept through a free semaphore for "
            << std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - freed).count()
            << " ms");
    if (got_soon) {
      auto wr = wf.get();
      CHECK_MESSAGE(wr.ok(), wr.describe());
    }
    c[2].resume();
  }

  // The fair line's undo rule (semaphore_scripts.hpp, rule F): a waiter's
  // failed attempt, granted on node 2 and refused on nodes 0 and 1 by a
  // stand-in holder, is undone by putting the waiter back in node 2's line
  // at its arrival, the same rank it has on nodes 0 and 1, and wakes nobody
  // (no publish on node 2): failed attempts can never wake each other in a
  // loop. Then the holder leaves and wakes W on its own channel on nodes 0
  // and 1: with node 2, where its last answer found a permit free, that is
  // a quorum, and W gets the permit long before its 20 s retry delay and is
  // in no line afterwards.
  TEST_CASE("a waiter's failed attempt is undone back into the line at its arrival, waking nobody") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-attack-undo-line");
    const std::string set = "redsync:sem:{" + name + "}";
    const std::string line = set + ":line";
    plant_foreign_permit(c, name, {0, 1});
    redis_client n2(c[2]);
    n2.reset_stats();
    redsync::Redsync rw(c.uris(), fresh_nodes());
    // 1 s per node: a loaded machine's slow reply must not fail the last
    // attempt (the next one would be 20 s away).
    auto w = rw.new_semaphore(
        name, 1, {.expiry = 20s, .tries = 3, .retry_delay = [](int) { return 20s; }, .timeout_factor = 0.05});
    auto wf = w.acquire_future(redsync::context::timeout(60s));
    const auto in_line = [&](std::size_t i) {
      auto r = redis_client(c[i]).command({"ZRANGE", line, "0", "-1", "WITHSCORES"});
      return r.elements.size() == 2 ? r.elements[0].str + " " + r.elements[1].str : std::string();
    };
    // W listens on its own channel (the only one subscribed), and looks
    // once more after subscribing; then it sleeps its 20 s retry delay.
    std::string channel;
    REQUIRE(wait_until(
        [&] {
          auto r = redis_client(c[0]).command({"PUBSUB", "CHANNELS", "redsync:sem-release:" + name + ":*"});
          if (r.elements.size() != 1) return false;
          channel = r.elements[0].str;
          return true;
        },
        10s));
    // Undone on node 2 (no permit left there), and back in its line at the
    // rank it has on nodes 0 and 1.
    const auto settled = [&] {
      const std::string two = in_line(2);
      return permits_on(n2, name) == 0 && !two.empty() && in_line(0) == two && in_line(1) == two;
    };
    REQUIRE(wait_until(settled, 10s));
    const auto calls = script_calls(n2);
    std::this_thread::sleep_for(300ms);
    CHECK(settled());
    CHECK(n2.calls("publish") == 0);
    CHECK(script_calls(n2) == calls);  // nothing without a wake-up
    for (std::size_t i : {0u, 1u}) {
      redis_client cl(c[i]);
      cl.command({"ZREM", set, "0:someone-else"});
      cl.command({"PUBLISH", channel, "0"});
    }
    REQUIRE(wf.wait_for(10s) == std::future_status::ready);
    auto wr = wf.get();
    REQUIRE_MESSAGE(wr.ok(), wr.describe());
    for (std::size_t i = 0; i < 3; ++i) CHECK(wait_until([&] { return in_line(i).empty(); }, 5s));
    CHECK(wr.permit.release({}).ok());
  }

  // A waiter whose tries run out leaves the line on every node: its place
  // must not hold back the waiters behind it until its lease runs out.
  TEST_CASE("a waiter whose tries run out leaves the line on every node") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-attack-retry");
    plant_foreign_permit(c, name, {0, 1});
    redis_client n2(c[2]);
    redsync::Redsync rw(c.uris(), fresh_nodes());
    auto w = rw.new_semaphore(
        name, 1, {.expiry = 20s, .tries = 3, .retry_delay = [](int) { return 1s; }, .timeout_factor = 0.05});
    auto r = w.acquire(redsync::context::timeout(60s));
    CHECK_MESSAGE(r.outcome.is(redsync::errc::busy), r.describe());
    CHECK(r.outcome.attempts == 3);
    const std::string line = "redsync:sem:{" + name + "}:line";
    for (std::size_t i = 0; i < 3; ++i)
      CHECK(wait_until([&] { return redis_client(c[i]).command({"ZCARD", line}).integer == 0; }, 5s));
    CHECK(permits_on(n2, name) == 0);
  }

  // The documented assumption "one node list" (README, Safety; safety.md):
  // the quorum bound counts on every client listing the same N nodes, and
  // nothing refuses a client with another list. A client over 3 of the 5
  // nodes (q = 2) and one over all 5 (q = 3) both hold the k = 1
  // semaphore. This pins the limit the docs state: were it to change, the
  // docs would have to.
  TEST_CASE(
      "clients listing different node sets can both hold a k = 1 semaphore: the docs' one-node-list rule") {
    cluster c(5);
    prime_records(c.uris());
    const auto name = unique_name("sem-attack-node-lists");
    redsync::Redsync three(first(c.uris(), 3), fresh_nodes());
    redsync::Redsync five(c.uris(), fresh_nodes());
    auto a = three.new_semaphore(name, 1, {.expiry = 20s, .tries = 1});
    auto b = five.new_semaphore(name, 1, {.expiry = 20s, .tries = 1});
    REQUIRE(a.quorum() == 2);
    REQUIRE(b.quorum() == 3);
    c[2].pause();  // a's permit lands on nodes 0 and 1 only
    auto ra = a.try_acquire({});
    c[2].resume();
    REQUIRE_MESSAGE(ra.ok(), ra.describe());
    auto rb = b.try_acquire({});
    CHECK_MESSAGE((ra.permit.held() && rb.permit.held()), ra.describe() << " / " << rb.describe());
  }

  // Was an availability bug: a waiter's first round runs before it watches
  // the release channel, and only the waiter whose watch() opened the
  // channel's subscription got on_subscribed() and looked once more. A
  // second waiter of the same Redsync missed every release made during its
  // first round: here two permits are freed, the first waiter takes one,
  // and the second slept its whole retry delay while the other was free.
  // Now watch() says when the subscription was already active, and such a
  // waiter looks again at once (release_listener::watch).
  TEST_CASE("a second waiter of one Redsync hears releases made during its first round") {
    cluster c(5);
    prime_records(c.uris());
    const auto name = unique_name("sem-attack-second-waiter");
    redsync::Redsync rh(c.uris(), fresh_nodes());
    auto h = rh.new_semaphore(name, 2, {.expiry = 30s, .tries = 1, .timeout_factor = 0.01});
    redsync::Redsync rw(c.uris(), fresh_nodes());
    // Rounds of 1.5 s: node 4 is paused, so each waits its timeout there.
    auto w = rw.new_semaphore(
        name, 2, {.expiry = 30s, .tries = 2, .retry_delay = [](int) { return 30s; }, .timeout_factor = 0.05});
    REQUIRE(w.quorum() == 4);
    c[4].pause();
    auto h1 = h.try_acquire({});
    auto h2 = h.try_acquire({});
    REQUIRE_MESSAGE(h1.ok(), h1.describe());
    REQUIRE_MESSAGE(h2.ok(), h2.describe());
    redis_client n0(c[0]);
    // The first waiter: refused, subscribed, refused once more on
    // subscribing, now in its 30 s retry delay.
    const auto before_w1 = script_calls(n0);
    auto w1 = w.acquire_future(redsync::context::timeout(60s));
    REQUIRE(wait_until([&] { return script_calls(n0) >= before_w1 + 2; }, 15s));
    std::this_thread::sleep_for(2s);  // its second round ends (1.5 s at node 4)
    REQUIRE(w1.wait_for(0s) == std::future_status::timeout);
    // The second waiter's first attempt was refused on node 0; its round
    // waits 1.5 s more for node 4. Both holders release now.
    const auto before_w2 = script_calls(n0);
    auto w2 = w.acquire_future(redsync::context::timeout(60s));
    REQUIRE(wait_until([&] { return script_calls(n0) > before_w2; }, 10s));
    auto rel1 = h1.permit.release_future();
    auto rel2 = h2.permit.release_future();
    // The first waiter is woken and takes one permit.
    REQUIRE(w1.wait_for(10s) == std::future_status::ready);
    auto r1 = w1.get();
    REQUIRE_MESSAGE(r1.ok(), r1.describe());
    // The other permit is free on nodes 0..3, a quorum.
    const bool got_soon = w2.wait_for(8s) == std::future_status::ready;
    CHECK_MESSAGE(got_soon, "the second waiter slept through a free permit");
    if (got_soon) {
      auto r2 = w2.get();
      CHECK_MESSAGE(r2.ok(), r2.describe());
    }
    c[4].resume();
    (void)rel1.get();
    (void)rel2.get();
  }

  // Was a leaked permit: ~permit skipped the release once the engine was
  // shutting down, and a posted release would run after the shutdown's
  // wind-up anyway (bounded_operation::submit_unanswered). A permit handed
  // to an acquire_async callback that drops it while its Redsync is being
  // destroyed (the callback runs on the loop thread, before the engine's
  // queued shutdown) must still be released.
  TEST_CASE("a permit dropped by its acquire callback while the Redsync shuts down is still released") {
    cluster c(3);
    const auto name = unique_name("sem-attack-shutdown-drop");
    drop_at_shutdown drop;
    {
      redsync::Redsync rs(c.uris(), fresh_nodes());
      auto sem = rs.new_semaphore(name, 1, {.expiry = 60s, .tries = 1});
      sem.try_acquire_async({}, [&](redsync::acquire_result r) {
        drop.report_then_wait(r.ok());
        // The application decides it no longer needs the permit, just as
        // the Redsync goes away on another thread.
      });  // r (and its permit) is destroyed here
      REQUIRE(drop.reported());
      drop.destroying();
    }  // sem, then rs: ~engine marks shutting_down and waits for the loop
    for (std::size_t i = 0; i < c.size(); ++i) {
      CAPTURE(i);
      redis_client cl(c[i]);
      CHECK(permits_on(cl, name) == 0);
    }
  }

  // Held up (backs docs/safety.md "At most k holders" on a restart without
  // persistence, and the per-slot token after it): a holder granted by nodes
  // 0 and 1 only (node 2 was paused), then node 0 restarts empty. Node 0
  // and node 2 together are a quorum for k = 1, but node 0 must not vote
  // while the holder may still hold; its extension fails; and the slot's next
  // holder gets a greater token. With the restart guard on, and off (the
  // counter repair's delay alone).
  TEST_CASE("a node restarted empty never seats a second holder of a k = 1 semaphore, and the token grows") {
    for (const bool guard : {true, false}) {
      CAPTURE(guard);
      cluster c(3);
      prime_records(c.uris());
      redsync::redsync_options o = fresh_nodes();
      o.restart_guard = guard;
      const auto name = unique_name("sem-attack-restart");
      const redsync::semaphore_options so{.expiry = 2s, .tries = 1};
      redsync::Redsync rh(c.uris(), o);
      redsync::Redsync rw(c.uris(), o);
      auto h = rh.new_semaphore(name, 1, so);
      auto w = rw.new_semaphore(name, 1, so);
      // prime_records stamped brand-new records, which count at once.
      redsync::acquire_result held;
      c[2].pause();
      REQUIRE(wait_until(
          [&] {
            held = h.try_acquire({});
            return held.ok();
          },
          15s));
      c[2].resume();
      REQUIRE(held.outcome.nodes[2].status == redsync::node_status::timeout);
      c[0].restart();
      int overlaps = 0;
      int extended = 0;
      while (held.permit.held()) {
        auto r = w.try_acquire({});
        if (r && held.permit.held()) ++overlaps;
        if (held.permit.extend({}).ok()) ++extended;
        std::this_thread::sleep_for(50ms);
      }
      CHECK(overlaps == 0);
      CHECK(extended == 0);
      // Once node 0 is trusted again, the slot's next holder gets a greater
      // token.
      redsync::acquire_result next;
      REQUIRE(wait_until(
          [&] {
            next = w.try_acquire({});
            return next.ok() && next.outcome.nodes[0].status == redsync::node_status::ok;
          },
          20s));
      CHECK(next.permit.token() > held.permit.token());
    }
  }

  // Held up: an acquisition abandoned by its deadline (or cancelled) while
  // its round still waits on a frozen node leaves no grant behind, on the
  // frozen node either (its grant and then the undo run, in order, when it
  // resumes).
  TEST_CASE("an acquisition abandoned mid-round by its deadline or a cancel leaves no grant anywhere") {
    cluster c(3);
    prime_records(c.uris());
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-attack-abandon");
    auto sem = rs.new_semaphore(name, 1, {.expiry = 20s, .tries = 1});  // per-node timeout 1 s
    c[2].pause();
    auto by_deadline = sem.try_acquire(redsync::context::timeout(300ms));
    CHECK_MESSAGE(by_deadline.outcome.is(redsync::errc::deadline_exceeded), by_deadline.describe());
    std::stop_source stop;
    auto cancelled = sem.acquire_future(redsync::context::cancellable(stop.get_token()));
    redis_client n0(c[0]);
    REQUIRE(wait_until([&] { return permits_on(n0, name) == 1; }, 5s));
    stop.request_stop();
    auto r = cancelled.get();
    CHECK_MESSAGE(r.outcome.is(redsync::errc::cancelled), r.describe());
    c[2].resume();
    for (std::size_t i = 0; i < c.size(); ++i) {
      CAPTURE(i);
      redis_client cl(c[i]);
      CHECK(wait_until([&] { return permits_on(cl, name) == 0; }, 5s));
    }
    auto after = sem.try_acquire({});
    CHECK_MESSAGE(after.ok(), after.describe());
  }

  // Held up: bad numbers are refused by name, never defaulted.
  TEST_CASE("bad permits, quorum and timing are refused at construction, naming the value") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-attack-input");
    CHECK_THROWS_WITH_AS(rs.new_semaphore(name, -1), doctest::Contains("permits = -1"),
                         redsync::config_error);
    CHECK_THROWS_WITH_AS(rs.new_semaphore(name, 1025), doctest::Contains("permits = 1025"),
                         redsync::config_error);
    CHECK_THROWS_WITH_AS(rs.new_semaphore(name, 1, {.quorum = 4}),
                         doctest::Contains("semaphore_options.quorum = 4"), redsync::config_error);
    CHECK_THROWS_WITH_AS(rs.new_semaphore(name, 1, {.quorum = 1}),
                         doctest::Contains("semaphore_options.quorum = 1"), redsync::config_error);
    CHECK_THROWS_AS(rs.new_semaphore(name, 1, {.expiry = 0ms}), redsync::config_error);
    CHECK_THROWS_AS(rs.new_semaphore(name, 1, {.expiry = 3ms}),
                    redsync::config_error);  // drift 2 ms + timeout 1 ms
    CHECK_THROWS_AS(rs.new_semaphore(name, 1, {.drift_factor = 1.0}), redsync::config_error);
    CHECK_THROWS_AS(rs.new_semaphore(name, 1, {.timeout_factor = 0.0}), redsync::config_error);
    CHECK_THROWS_AS(rs.new_semaphore("", 1), redsync::config_error);
    CHECK(rs.new_semaphore(name, 1024).quorum() == 3);
    CHECK(rs.new_semaphore(name, 1, {.quorum = 3}).quorum() == 3);
    // The largest k works end to end.
    auto big = rs.new_semaphore(name, 1024, {.expiry = 2s});
    auto r = big.try_acquire({});
    CHECK_MESSAGE(r.ok(), r.describe());
    CHECK(r.permit.slot() < 1024u);
  }
}
