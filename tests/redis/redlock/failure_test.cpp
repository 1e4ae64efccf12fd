// Redlock under failure: nodes killed, frozen (SIGSTOP), restarted, holding
// the wrong type, or asking for a password; and bad configurations.

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

redsync::mutex_options quick(redsync::mutex_options o = {}) {
  o.retry_delay = [](int) { return 10ms; };
  return o;
}

}  // namespace

TEST_SUITE("failure") {
  TEST_CASE("lock succeeds with 2 of 5 nodes killed") {
    cluster c(5);
    prime_records(c.uris());
    redsync::Redsync rs(c.uris(), fresh_nodes());
    c[1].kill();
    c[3].kill();
    auto m = rs.new_mutex(unique_name("two-down"), quick({.expiry = 2s}));
    auto r = m.lock(redsync::context{});
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(r.nodes[1].status == redsync::node_status::unreachable);
    CHECK(r.nodes[3].status == redsync::node_status::unreachable);
    CHECK_FALSE(r.nodes[1].message.empty());
    CHECK(r.nodes_with(redsync::node_status::ok).size() == 3);
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("lock fails with 3 of 5 nodes killed and leaves no key on the live nodes") {
    cluster c(5);
    prime_records(c.uris());
    redsync::Redsync rs(c.uris(), fresh_nodes());
    c[0].kill();
    c[2].kill();
    c[4].kill();
    const auto name = unique_name("three-down");
    auto m = rs.new_mutex(name, quick({.expiry = 2s, .tries = 3}));
    auto r = m.lock(redsync::context{});
    CHECK(r.error == redsync::errc::no_quorum);
    CHECK(r.attempts == 3);
    CHECK(r.nodes_with(redsync::node_status::unreachable).size() == 3);
    // The release of the failed attempt was awaited on the responsive nodes.
    CHECK(absent_on(c, name, {1, 3}));
    CHECK_FALSE(m.held());
  }

  TEST_CASE("the quorum boundary: every subset of pre-taken nodes decides the outcome") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    // Walk all 32 subsets: nodes in the subset already hold someone else's value.
    for (unsigned mask = 0; mask < 32; ++mask) {
      const auto name = unique_name("subset");
      int taken = 0;
      for (std::size_t i = 0; i < 5; ++i) {
        if (mask & (1u << i)) {
          redis_client(c[i]).command({"SET", name, "other", "PX", "60000"});
          ++taken;
        }
      }
      auto m = rs.new_mutex(name, {.tries = 1});
      auto r = m.lock(redsync::context{});
      CAPTURE(mask);
      if (taken <= 2) {
        CHECK(r.ok());
        CHECK(m.unlock(redsync::context{}).ok());
      } else {
        CHECK(r.error == redsync::errc::busy);
        // Our partial SETs were released; the other holder's keys are intact.
        for (std::size_t i = 0; i < 5; ++i) {
          const auto v = redis_client(c[i]).get(name);
          if (mask & (1u << i))
            CHECK(v == std::string("other"));
          else
            CHECK_FALSE(v.has_value());
        }
      }
    }
  }

  TEST_CASE("lock succeeds with 2 of 5 nodes frozen, within the per-node timeout plus a margin") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    // Connect first, so the measurement is about frozen nodes, not connecting.
    auto warm = rs.new_mutex(unique_name("warm"));
    REQUIRE(warm.lock(redsync::context{}).ok());
    REQUIRE(warm.unlock(redsync::context{}).ok());
    c[0].pause();
    c[4].pause();
    // timeout = 2 s * 0.1 = 200 ms
    auto m = rs.new_mutex(unique_name("two-frozen"), {.expiry = 2s, .timeout_factor = 0.1});
    const auto t0 = clock_type::now();
    auto r = m.lock(redsync::context{});
    const auto took = clock_type::now() - t0;
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(took >= 150ms);         // it did wait for the frozen nodes ...
    CHECK(took < 200ms + 800ms);  // ... but only about the timeout
    CHECK(r.nodes[0].status == redsync::node_status::timeout);
    CHECK(r.nodes[4].status == redsync::node_status::timeout);
    c[0].resume();
    c[4].resume();
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE(
      "with fail-fast, lock and unlock with 2 of 5 nodes frozen return well before the timeout, and the "
      "unlock "
      "releases the late yes once they wake") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto warm = rs.new_mutex(unique_name("warm"));
    REQUIRE(warm.lock(redsync::context{}).ok());
    REQUIRE(warm.unlock(redsync::context{}).ok());
    c[1].pause();
    c[2].pause();
    // timeout = 20 s * 0.1 = 2 s; "well before" is half of it.
    const auto name = unique_name("fail-fast");
    auto m = rs.new_mutex(name, {.expiry = 20s, .timeout_factor = 0.1, .fail_fast = true});
    auto t0 = clock_type::now();
    auto r = m.lock(redsync::context{});
    auto took = clock_type::now() - t0;
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(took < 1s);
    CHECK(r.nodes[1].status == redsync::node_status::not_awaited);
    CHECK(r.nodes[2].status == redsync::node_status::not_awaited);
    t0 = clock_type::now();
    auto u = m.unlock(redsync::context{});
    took = clock_type::now() - t0;
    CHECK_MESSAGE(u.ok(), u.describe());
    CHECK(took < 1s);
    c[1].resume();
    c[2].resume();
    // The frozen nodes run the SET once they wake (a yes nobody awaited),
    // then the release queued behind it: gone long before the 20 s expiry.
    for (std::size_t i = 0; i < c.size(); ++i)
      CHECK_MESSAGE(wait_until([&] { return !redis_client(c[i]).exists(name); }, 5s), "node ", i);
  }

  TEST_CASE("with 3 of 5 frozen, lock fails after `tries` attempts and no key is left once they resume") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto warm = rs.new_mutex(unique_name("warm"));
    REQUIRE(warm.lock(redsync::context{}).ok());
    REQUIRE(warm.unlock(redsync::context{}).ok());
    const auto name = unique_name("three-frozen");
    c[0].pause();
    c[1].pause();
    c[2].pause();
    // A long expiry (60 s) with a short timeout (60 s * 0.002 = 120 ms): a key
    // that disappears soon after SIGCONT was released, it did not expire.
    auto m = rs.new_mutex(name, quick({.expiry = 60s, .tries = 3, .timeout_factor = 0.002}));
    const auto t0 = clock_type::now();
    auto r = m.lock(redsync::context{});
    const auto took = clock_type::now() - t0;
    CHECK(r.error == redsync::errc::no_quorum);
    CHECK(r.attempts == 3);
    CHECK(r.nodes_with(redsync::node_status::timeout).size() == 3);
    // tries x (timeout + retry delay), with a generous margin.
    CHECK(took < 3 * (120ms + 10ms) + 1500ms);
    CHECK(absent_on(c, name, {3, 4}));
    c[0].resume();
    c[1].resume();
    c[2].resume();
    // The frozen nodes apply our SETs and then our releases, in that order.
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2, 3, 4}); }, 3s));
    for (std::size_t i : {0u, 1u, 2u}) CHECK(redis_client(c[i]).calls("set") >= 1);
  }

  TEST_CASE("a cancelled lock still releases on frozen nodes once they resume") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto warm = rs.new_mutex(unique_name("warm"));
    REQUIRE(warm.lock(redsync::context{}).ok());
    REQUIRE(warm.unlock(redsync::context{}).ok());
    const auto name = unique_name("cancel-frozen");
    c[0].pause();
    c[1].pause();
    auto m = rs.new_mutex(name, {.expiry = 60s, .timeout_factor = 0.05});  // 3 s timeout
    std::stop_source stop;
    auto f = m.lock_future(redsync::context::cancellable(stop.get_token()));
    REQUIRE(f.wait_for(100ms) == std::future_status::timeout);
    stop.request_stop();
    REQUIRE(f.wait_for(1s) == std::future_status::ready);
    CHECK(f.get().error == redsync::errc::cancelled);
    c[0].resume();
    c[1].resume();
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2}); }, 3s));
  }

  TEST_CASE("unlock reaches every node even when its deadline has already passed") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("late-unlock");
    auto m = rs.new_mutex(name);
    REQUIRE(m.lock(redsync::context{}).ok());
    auto r = m.unlock(redsync::context::until(clock_type::now() - 1s));
    // Either it finished before the deadline timer fired or it reports the
    // deadline; in both cases the keys are gone.
    CHECK((r.ok() || r.error == redsync::errc::deadline_exceeded));
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2}); }, 2s));
  }

  TEST_CASE("a WRONGTYPE key on one node is a typed error for that node and the others still make a quorum") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("wrongtype");
    auto m = rs.new_mutex(name);
    REQUIRE(m.lock(redsync::context{}).ok());
    {
      redis_client cl(c[2]);
      cl.command({"DEL", name});
      cl.command({"RPUSH", name, "a", "b"});
    }
    auto r = m.unlock(redsync::context{});
    REQUIRE_MESSAGE(r.ok(), r.describe());
    const auto& n = r.nodes[2];
    CHECK(n.status == redsync::node_status::reply_error);
    CHECK(n.error_class == redsync::server_error::wrongtype);
    CHECK(n.address == c[2].address());
    CHECK(n.message.find("WRONGTYPE") != std::string::npos);
    CHECK(redis_client(c[2]).command({"LLEN", name}).integer == 2);
  }

  TEST_CASE("a script error after our SET ran (fencing counter of the wrong type) still releases that key") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("fence-wrongtype");
    // On three nodes the acquire script's SET succeeds and its increment of
    // the counter fails: those nodes answer an error, yet hold our value.
    for (std::size_t i : {0, 1, 2}) redis_client(c[i]).command({"RPUSH", "redsync:node", "x"});
    auto m = rs.new_mutex(name, quick({.expiry = 20s, .tries = 2}));
    auto r = m.lock(redsync::context{});
    CHECK(r.error == redsync::errc::no_quorum);
    CHECK(r.nodes_with(redsync::node_status::reply_error).size() == 3);
    // Without the cleanup the key would stay on nodes 0..2 for the full 20 s.
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2, 3, 4}); }, 2s));
  }

  TEST_CASE("a node that requires a password: none gives NOAUTH, a wrong one WRONGPASS, for that node only") {
    cluster c(4);
    redis_server secured({.password = "s3cret"});
    const auto name = unique_name("auth");

    prime_records(c.uris());  // the fifth node never answers, so a brand-new cluster could not start
    auto uris = c.uris();
    uris.push_back("redis://127.0.0.1:" + std::to_string(secured.port()));
    {
      redsync::Redsync rs(uris, fresh_nodes());
      auto m = rs.new_mutex(name);
      auto r = m.lock(redsync::context{});
      REQUIRE_MESSAGE(r.ok(), r.describe());
      CHECK(r.nodes[4].status == redsync::node_status::reply_error);
      CHECK(r.nodes[4].error_class == redsync::server_error::noauth);
      CHECK(r.nodes[4].address == secured.address());
      CHECK(m.unlock(redsync::context{}).ok());
    }
    uris.back() = "redis://:wrong@127.0.0.1:" + std::to_string(secured.port());
    {
      redsync::Redsync rs(uris, fresh_nodes());
      auto m = rs.new_mutex(name);
      auto r = m.lock(redsync::context{});
      REQUIRE_MESSAGE(r.ok(), r.describe());
      CHECK(r.nodes[4].status == redsync::node_status::reply_error);
      CHECK_MESSAGE(r.nodes[4].message.find("WRONGPASS") != std::string::npos, r.nodes[4].message);
      CHECK(r.nodes[4].error_class == redsync::server_error::wrongpass);
      CHECK(m.unlock(redsync::context{}).ok());
    }
    uris.back() = "redis://:s3cret@127.0.0.1:" + std::to_string(secured.port());
    {
      redsync::Redsync rs(uris, fresh_nodes());
      auto m = rs.new_mutex(name);
      auto r = m.lock(redsync::context{});
      REQUIRE_MESSAGE(r.ok(), r.describe());
      // It answers now; the first time it is met its record is repaired,
      // so it may still be excluded from this vote.
      CHECK(r.nodes[4].status != redsync::node_status::reply_error);
      CHECK(r.nodes[4].error_class == redsync::server_error::none);
      CHECK(m.unlock(redsync::context{}).ok());
    }
  }

  TEST_CASE("with too few nodes accepting the password, lock fails as no_quorum naming the auth errors") {
    cluster c(3, {.password = "pw"});
    redsync::Redsync rs(c.uris(), fresh_nodes());  // the harness URIs carry the password
    std::vector<std::string> bad;
    for (std::size_t i = 0; i < 3; ++i) bad.push_back("redis://127.0.0.1:" + std::to_string(c[i].port()));
    redsync::Redsync no_auth(bad, fresh_nodes());
    auto m = no_auth.new_mutex(unique_name("noauth"), {.tries = 1});
    auto r = m.lock(redsync::context{});
    CHECK(r.error == redsync::errc::no_quorum);
    for (const auto& n : r.nodes) CHECK_MESSAGE(n.error_class == redsync::server_error::noauth, n.message);
    auto ok = rs.new_mutex(unique_name("auth-ok"));
    CHECK(ok.lock(redsync::context{}).ok());
  }

  TEST_CASE("a node killed with a command in flight fails that node only, and the next call reconnects") {
    cluster c(5);
    redsync::Redsync rs(c.uris(),
                        fresh_nodes({.reconnect_backoff_min = 10ms, .reconnect_backoff_max = 50ms}));
    auto warm = rs.new_mutex(unique_name("warm"));
    REQUIRE(warm.lock(redsync::context{}).ok());
    REQUIRE(warm.unlock(redsync::context{}).ok());

    c[2].pause();  // so the SET is surely in flight when the node dies
    auto m = rs.new_mutex(unique_name("in-flight"), {.expiry = 20s});  // 1 s timeout
    auto f = m.lock_future();
    REQUIRE(f.wait_for(50ms) == std::future_status::timeout);
    c[2].kill();
    REQUIRE(f.wait_for(3s) == std::future_status::ready);
    auto r = f.get();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(r.nodes[2].status == redsync::node_status::unreachable);
    CHECK(r.elapsed < 1s);  // the drop was noticed, not waited out as a timeout
    CHECK(m.unlock(redsync::context{}).ok());

    c[2].restart();
    // The pool reconnects on a later call (after its short backoff).
    CHECK(wait_until(
        [&] {
          auto probe = rs.new_mutex(unique_name("probe"), {.tries = 1});
          auto pr = probe.lock(redsync::context{});
          // It answers again (its vote waits for the repair of its record).
          const auto st = pr.nodes[2].status;
          const bool back =
              pr.ok() && (st == redsync::node_status::ok || st == redsync::node_status::excluded);
          if (pr.ok()) (void)probe.unlock(redsync::context{});
          return back;
        },
        3s));
  }

  TEST_CASE("bad configuration is rejected at construction with the bad value named") {
    auto message_of = [](auto&& fn) -> std::string {
      try {
        fn();
      } catch (const redsync::config_error& e) {
        return e.what();
      }
      return "<no config_error>";
    };
    const std::vector<std::string> one{"redis://127.0.0.1:1"};

    CHECK(message_of([] { redsync::Redsync rs(std::vector<std::string>{}); }).find("0 nodes") !=
          std::string::npos);
    CHECK(message_of([] { redsync::Redsync rs({"http://h:1"}); }).find("http") != std::string::npos);
    CHECK(message_of([] { redsync::Redsync rs({"redis://h:99999"}); }).find("99999") != std::string::npos);
    CHECK(message_of([] { redsync::Redsync rs({"redis://h:12ab"}); }).find("12ab") != std::string::npos);
    CHECK(message_of([] { redsync::Redsync rs({"not a uri"}); }).find("not a uri") != std::string::npos);

    redsync::Redsync rs(one);
    CHECK(message_of([&] { (void)rs.new_mutex(""); }).find("name") != std::string::npos);
    CHECK(message_of([&] { (void)rs.new_mutex("x", {.expiry = 0ms}); }).find("expiry") != std::string::npos);
    CHECK(message_of([&] { (void)rs.new_mutex("x", {.expiry = -5ms}); }).find("-5") != std::string::npos);
    CHECK(message_of([&] { (void)rs.new_mutex("x", {.tries = 0}); }).find("tries") != std::string::npos);
    CHECK(message_of([&] { (void)rs.new_mutex("x", {.drift_factor = 1.0}); }).find("drift_factor") !=
          std::string::npos);
    CHECK(message_of([&] { (void)rs.new_mutex("x", {.timeout_factor = 0.0}); }).find("timeout_factor") !=
          std::string::npos);
    CHECK(message_of([&] { (void)rs.new_mutex("x", {.timeout_factor = 1.0}); }).find("timeout_factor") !=
          std::string::npos);
    CHECK(message_of([&] { (void)rs.new_mutex("x", {.expiry = 2ms}); }).find("2") != std::string::npos);
  }

}  // TEST_SUITE
