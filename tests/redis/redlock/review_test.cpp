// Findings of the attack review of the uncontended fast path (MULTI/EXEC)
// and of script_mode::functions, each as a test on real servers that fails
// while the finding stands. The schedules are in the review report; each
// test names the code it points at.

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "slow_node.hpp"
#include "tcp_proxy.hpp"
#include "wait.hpp"

#include "redlock/scripts/scripts.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using redsync::script_mode;
using namespace redsync::test;

TEST_SUITE("review") {
  // fast_acquire.hpp / node_trust.hpp promise that a node answering the
  // transaction with an error ("MULTI or EXEC refused by the ACL or renamed
  // away") gets the script from then on. An ACL refusal of EXEC makes Redis
  // discard the transaction (EXECABORT), but an unknown EXEC (renamed away)
  // leaves the connection inside MULTI: every later command on it, the
  // release and the script fallback included, is only QUEUED, forever.
  TEST_CASE("a server with EXEC renamed away still serves try_lock through the script after one refusal") {
    cluster c(3, {.extra_args = {"--rename-command", "EXEC", ""}});
    redsync::Redsync rs(c.uris(), fresh_nodes());
    // The first lock (script) teaches the client every node's window, so the
    // next one sends the transaction.
    auto m = rs.new_mutex(unique_name("review-exec-renamed"), {.tries = 1});
    REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
    REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());
    for (int k = 0; k < 3; ++k) {
      CAPTURE(k);
      auto r = m.try_lock(redsync::context::timeout(5s));
      CHECK_MESSAGE(r.ok(), r.describe());
      if (r.ok()) CHECK(m.unlock(redsync::context::timeout(5s)).ok());
    }
    // Nothing of ours is left behind, queued or not.
    CHECK(wait_until(
        [&] {
          for (std::size_t i = 0; i < c.size(); ++i)
            if (redis_client(c[i]).exists(m.name())) return false;
          return true;
        },
        2s));
  }

  // script_call.cpp's NOSCRIPT fallback (and load_and_call in functions
  // mode) sends the acquire script's source only when NOSCRIPT comes back.
  // If the round has already reported (fail_fast here; a deadline or a
  // cancellation does the same through on_abandon), the failed attempt's
  // release goes out on the same connection before that EVAL: the node runs
  // the release (nothing to delete yet), then the EVAL, whose SET wins and
  // stays for a whole expiry although the attempt failed. README: "the
  // attempt is released on every node where our SET may have landed".
  TEST_CASE_FIXTURE(
      slow_last_node,
      "a failed try_lock leaves no key on a slow node whose script cache lacked the acquire script") {
    const auto name = unique_name("review-noscript-order");
    // Warmed with another name and a shorter expiry than the 30 s below.
    warm_with_10s_lock(rs, "review-noscript-warm");
    // Another holder has the name on nodes 0 and 1 only.
    for (std::size_t i = 0; i < 2; ++i)
      REQUIRE(redis_client(c[i]).command({"SET", name, "someone-else", "PX", "60000"}).str == "OK");
    // Node 2 lost its script cache and has since run a release (any client's),
    // but not yet an acquisition.
    flush_scripts_but(c[2], redsync::detail::release_script());
    auto m = rs.new_mutex(name, {.expiry = 30s, .tries = 1, .fail_fast = true});
    slow.delay(200ms);
    auto r = m.try_lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(r.busy(), r.describe());
    // The command timeout is 1.5 s: within 3 s every command of the attempt
    // has been answered or dropped. No key of the failed attempt may appear.
    CHECK_FALSE_MESSAGE(wait_until([&] { return redis_client(c[2]).exists(name); }, 3s),
                        "node 2 holds the failed attempt's value, pttl ", redis_client(c[2]).pttl(name));
    slow.normal();
  }

  // function_library.cpp registers every script but check without flags.
  // Redis refuses such a function up front while the server is over its
  // maxmemory (noeviction, which node_trust accepts), whereas EVAL runs a
  // script until it calls a command that may grow memory: DEL and PEXPIRE do
  // not. So in functions mode a holder can neither release nor extend on a
  // node at its memory limit, where the same library in eval mode can.
  TEST_CASE(
      "on nodes over their maxmemory a lock can still be extended and released, in either script mode") {
    for (const script_mode mode : {script_mode::eval, script_mode::functions}) {
      CAPTURE(mode == script_mode::functions);
      cluster c(3);
      redsync::Redsync rs(c.uris(), fresh_nodes({.script_mode = mode}));
      auto m = rs.new_mutex(unique_name("review-oom"), {.tries = 1});
      // Every script or library the holder needs is loaded before the
      // memory runs out: the refusals below are not FUNCTION LOAD's.
      REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
      REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());
      REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
      REQUIRE(m.extend().ok());
      for (std::size_t i = 0; i < c.size(); ++i)
        REQUIRE(redis_client(c[i]).command({"CONFIG", "SET", "maxmemory", "1"}).str == "OK");
      auto extended = m.extend();
      CHECK_MESSAGE(extended.ok(), extended.describe());
      auto released = m.unlock(redsync::context::timeout(5s));
      CHECK_MESSAGE(released.ok(), released.describe());
      for (std::size_t i = 0; i < c.size(); ++i) {
        CHECK_FALSE(redis_client(c[i]).exists(m.name()));
        redis_client(c[i]).command({"CONFIG", "SET", "maxmemory", "0"});
      }
    }
  }
}

TEST_SUITE("review") {
  // A head refreshes its lease at least every head_refresh (command timeout
  // + 250 ms), whatever its retry delay: so a head that vanishes holds a
  // free lock up for its lease (twice that + the timeout + 1 s, 2.7 s
  // here), not for the 11 s its 5 s retry delay would make it. Try_lock
  // traffic (the transaction, which never reads the line) sees the
  // reservation until then, and is served after.
  TEST_CASE(
      "a head cut off from the nodes holds up try_lock traffic until its lease runs out, not for its retry "
      "delay") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("review-vanished-head");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());  // the script: rs learns every node's window
    // The head of the line, on another client reaching the nodes through
    // proxies; its retry delay is 5 s.
    std::vector<std::unique_ptr<tcp_proxy>> proxies;
    std::vector<std::string> proxied;
    for (std::size_t i = 0; i < c.size(); ++i) {
      proxies.push_back(std::make_unique<tcp_proxy>(c[i].port()));
      proxied.push_back("redis://127.0.0.1:" + std::to_string(proxies.back()->port()));
    }
    redsync::Redsync far(proxied, fresh_nodes({.shutdown_timeout = 0ms}));
    auto head = far.new_mutex(name, {.tries = 100, .retry_delay = [](int) { return 5000ms; }});
    auto waiting = head.lock_future();
    REQUIRE(wait_until([&] { return line_on_every_node(c, name, 1); }, 3s));
    for (auto& p : proxies) p->stall();  // the head vanishes
    const auto vanished = std::chrono::steady_clock::now();
    REQUIRE(holder.unlock(redsync::context{}).ok());
    // The release reserved the name for the head: try_lock is refused
    // until the head's lease runs out.
    auto first = rs.new_mutex(name, {.tries = 1});
    REQUIRE(wait_until([&] { return first.try_lock(redsync::context{}).ok(); }, 10s));
    CHECK(std::chrono::steady_clock::now() - vanished < 2700ms + 3s);
    REQUIRE(first.unlock(redsync::context{}).ok());
    // The head is gone from the line: the release above must not have
    // reserved the name for it again.
    auto second = rs.new_mutex(name, {.tries = 1});
    auto r2 = second.try_lock(redsync::context{});
    CHECK_MESSAGE(r2.ok(), r2.describe());
    if (r2.ok()) CHECK(second.unlock(redsync::context{}).ok());
    for (auto& p : proxies) p->normal();
  }
}

TEST_SUITE("review") {
  // The same root cause as the NOSCRIPT test above, for an extension: with
  // fail_fast the extension reports from the fast nodes, the unlock's
  // release goes out behind it, and the slow node runs the release before
  // the extend script's source, which (set_nx_on_extend) re-creates the key
  // the release had just deleted. README: "an extension never runs after a
  // release".
  TEST_CASE_FIXTURE(
      slow_last_node,
      "an extension answered NOSCRIPT by a slow node never re-creates the key after the unlock") {
    auto m = rs.new_mutex(unique_name("review-noscript-extend"),
                          {.expiry = 30s, .tries = 1, .fail_fast = true, .set_nx_on_extend = true});
    auto locked = m.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(locked.ok(), locked.describe());
    // Node 2 lost its script cache and has since run a release, but not an
    // extension (as after a restart, or an upgrade that changed only the
    // extend script).
    flush_scripts_but(c[2], redsync::detail::release_script());
    slow.delay(200ms);
    auto extended = m.extend();
    REQUIRE_MESSAGE(extended.ok(), extended.describe());
    auto released = m.unlock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(released.ok(), released.describe());
    // The release reaches node 2 through the slow proxy (fail_fast returned
    // before); within 3 s more (twice the 1.5 s command timeout) every
    // command has been answered or dropped; the key must not come back.
    REQUIRE(wait_until([&] { return !redis_client(c[2]).exists(m.name()); }, 3s));
    CHECK_FALSE_MESSAGE(wait_until([&] { return redis_client(c[2]).exists(m.name()); }, 3s),
                        "node 2 holds the released lock again, pttl ", redis_client(c[2]).pttl(m.name()));
    slow.normal();
  }
}

TEST_SUITE("review") {
  // The NOSCRIPT ordering with default options: a lock abandoned at its
  // deadline sends its release everywhere (on_abandon) behind the acquire
  // script, and the slow node's NOSCRIPT fallback then runs after it.
  TEST_CASE_FIXTURE(
      slow_last_node,
      "a lock abandoned at its deadline leaves no key on a slow node that had to be sent the script") {
    warm_with_10s_lock(rs, "review-deadline-warm");  // the 30 s lock below stays on the script
    flush_scripts_but(c[2], redsync::detail::release_script());
    auto m = rs.new_mutex(unique_name("review-noscript-deadline"), {.expiry = 30s});
    slow.delay(200ms);
    // Nodes 0 and 1 say yes at once; node 2's NOSCRIPT takes ~400 ms.
    auto r = m.lock(redsync::context::timeout(300ms));
    REQUIRE_MESSAGE(r.error == redsync::errc::deadline_exceeded, r.describe());
    CHECK_FALSE_MESSAGE(wait_until([&] { return redis_client(c[2]).exists(m.name()); }, 3s),
                        "node 2 holds the abandoned attempt's value, pttl ",
                        redis_client(c[2]).pttl(m.name()));
    CHECK_FALSE(redis_client(c[0]).exists(m.name()));
    CHECK_FALSE(redis_client(c[1]).exists(m.name()));
    slow.normal();
  }
}

TEST_SUITE("review") {
  // The release (lua/line_prelude.lua: reserve) writes the reservation (SET),
  // refused while the server is over
  // its maxmemory, in eval mode as in functions mode: a holder with a waiter
  // behind it cannot let go on such nodes, and the waiter waits out the
  // holder's whole expiry. Deleting the key (as when nobody waits) would be
  // allowed.
  TEST_CASE("on nodes over their maxmemory a lock with a waiter behind it can still be released") {
    for (const script_mode mode : {script_mode::eval, script_mode::functions}) {
      CAPTURE(mode == script_mode::functions);
      cluster c(3);
      redsync::Redsync rs(c.uris(), fresh_nodes({.script_mode = mode}));
      const auto name = unique_name("review-oom-waiter");
      auto holder = rs.new_mutex(name, {.tries = 1});
      // Every script or library is loaded before the memory runs out.
      REQUIRE(holder.lock(redsync::context::timeout(5s)).ok());
      REQUIRE(holder.unlock(redsync::context::timeout(5s)).ok());
      REQUIRE(holder.lock(redsync::context::timeout(5s)).ok());
      auto waiter = rs.new_mutex(name, {.tries = 1000, .retry_delay = [](int) { return 1000ms; }});
      auto waiting = waiter.lock_future(redsync::context::timeout(20s));
      REQUIRE(wait_until([&] { return line_on_every_node(c, name, 1); }, 3s));
      for (std::size_t i = 0; i < c.size(); ++i)
        REQUIRE(redis_client(c[i]).command({"CONFIG", "SET", "maxmemory", "1"}).str == "OK");
      auto released = holder.unlock(redsync::context::timeout(5s));
      CHECK_MESSAGE(released.ok(), released.describe());
      for (std::size_t i = 0; i < c.size(); ++i) {
        const auto v = redis_client(c[i]).get(name);
        CHECK_MESSAGE((!v || v->front() == '\0'), "node ", i, " still holds the released value");
        redis_client(c[i]).command({"CONFIG", "SET", "maxmemory", "0"});
      }
      REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
      auto got = waiting.get();
      if (got.ok()) CHECK(waiter.unlock(redsync::context::timeout(5s)).ok());
    }
  }
}
