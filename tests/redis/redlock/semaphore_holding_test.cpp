// Holding a permit safely (include/redsync/semaphore.hpp): auto-extension
// past several expiries, the lost signal once when the permit is gone from
// too many nodes, and none after a release. Bounds are generous against
// the expiries: the suite runs on loaded machines.

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// The permit's member on one node ("<slot>:<id>"), live or not.
bool holds_permit(redis_client& c, const std::string& name, const redsync::permit& p) {
  const auto r = c.command({"ZSCORE", semaphore_key(name), std::to_string(p.slot()) + ":" + p.id()});
  return !r.str.empty();
}

// Counts on_lost calls and remembers the last result.
// Counts on_lost calls and keeps the last one's reason.
struct lost_counter {
  std::atomic<int> calls{0};
  std::atomic<bool> was_lost_error{true};
  std::function<void(const redsync::result&)> callback() {
    return [this](const redsync::result& r) {
      if (r.error != redsync::errc::lost) was_lost_error = false;
      {
        std::lock_guard lk(mu);
        last_reason = r.reason;
      }
      ++calls;
    };
  }
  std::string reason() const {
    std::lock_guard lk(mu);
    return last_reason;
  }

 private:
  mutable std::mutex mu;
  std::string last_reason;
};

// Nodes, a Redsync on them, and an auto-extended semaphore of `k` permits
// (a unique name from `prefix`) whose losses `lost` counts.
struct watched {
  watched(const char* prefix, int k, redsync::semaphore_options o, std::size_t nodes = 3)
      : c(nodes), rs(c.uris(), fresh_nodes()), name(unique_name(prefix)), sem(make(k, std::move(o))) {}

  cluster c;
  redsync::Redsync rs;
  const std::string name;
  lost_counter lost;
  redsync::Semaphore sem;

 private:
  redsync::Semaphore make(int k, redsync::semaphore_options o) {
    o.auto_extend = true;
    o.on_lost = lost.callback();
    return rs.new_semaphore(name, k, std::move(o));
  }
};

}  // namespace

TEST_SUITE("semaphore holding") {
  TEST_CASE("an auto-extended permit stays held past four expiries, on every node") {
    watched w("sem-watchdog", 2, {.expiry = 1s});
    auto a = w.sem.try_acquire({});
    REQUIRE(a.ok());
    const auto first_until = a.permit.until();
    std::vector<std::unique_ptr<redis_client>> clients;
    for (std::size_t i = 0; i < w.c.size(); ++i) clients.push_back(std::make_unique<redis_client>(w.c[i]));
    const auto end = clock_type::now() + 4s;
    int samples = 0;
    while (clock_type::now() < end) {
      for (auto& cl : clients) CHECK(holds_permit(*cl, w.name, a.permit));
      CHECK(a.permit.held());
      ++samples;
      std::this_thread::sleep_for(100ms);
    }
    CHECK(samples > 10);
    // Well past the first validity: only extensions can explain it.
    CHECK(a.permit.until() > first_until + 2s);
    CHECK_FALSE(a.permit.lost());
    CHECK(w.rs.stats().permit_extensions.ok >= 3);
    CHECK(a.permit.release({}).ok());
    CHECK(w.lost.calls.load() == 0);
  }

  TEST_CASE("the lost signal fires once when the permit is deleted from a quorum of nodes") {
    watched w("sem-lost-del", 1, {.expiry = 2s, .auto_extend_interval = 100ms});
    REQUIRE(w.sem.quorum() == 2);
    auto a = w.sem.try_acquire({});
    REQUIRE(a.ok());
    auto token = a.permit.lost_token();
    CHECK_FALSE(token.stop_requested());
    for (std::size_t i : {0, 2})
      redis_client(w.c[i]).command({"DEL", semaphore_key(w.name), semaphore_key(w.name) + ":permits"});
    // The next extension (100 ms) hears "gone" from a quorum: lost at once,
    // well before the 2 s validity would run out.
    REQUIRE(wait_until([&] { return w.lost.calls.load() > 0; }, 1500ms));
    CHECK(w.lost.was_lost_error.load());
    CHECK(a.permit.lost());
    CHECK(token.stop_requested());
    CHECK_FALSE(a.permit.held());
    std::this_thread::sleep_for(500ms);  // five intervals: a second signal would arrive here
    CHECK(w.lost.calls.load() == 1);
    CHECK(w.rs.stats().lost_permits == 1);
    CHECK(a.permit.extend({}).error == redsync::errc::lost);
    // The release still removes it where it remained, and says it was lost.
    CHECK(a.permit.release({}).error == redsync::errc::lost);
    CHECK_FALSE(holds_permit(*std::make_unique<redis_client>(w.c[1]), w.name, a.permit));
  }

  TEST_CASE("the lost signal fires once, before the last computed until, when a quorum of nodes is frozen") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    std::atomic<clock_type::rep> lost_at{0};
    std::atomic<int> calls{0};
    auto sem = rs.new_semaphore(unique_name("sem-lost-frozen"), 2,
                                {.expiry = 1s, .auto_extend = true, .on_lost = [&](const redsync::result& r) {
                                   lost_at = clock_type::now().time_since_epoch().count();
                                   CHECK(r.error == redsync::errc::lost);
                                   CHECK_FALSE(r.reason.empty());
                                   ++calls;
                                 }});
    REQUIRE(sem.quorum() == 4);
    auto a = sem.try_acquire({});
    REQUIRE(a.ok());
    // Two frozen nodes leave three: fewer than the quorum of four.
    c[1].pause();
    c[3].pause();
    REQUIRE(wait_until([&] { return calls.load() > 0; }, 4s));
    const auto fired = clock_type::time_point(clock_type::duration(lost_at.load()));
    CHECK(fired < a.permit.until());
    CHECK(a.permit.lost());
    std::this_thread::sleep_for(500ms);
    CHECK(calls.load() == 1);
    c[1].resume();
    c[3].resume();
    CHECK(a.permit.release({}).error == redsync::errc::lost);
  }

  TEST_CASE("the lost signal fires once when every node is flushed") {
    watched w("sem-lost-flush", 1, {.expiry = 2s, .auto_extend_interval = 100ms});
    auto a = w.sem.try_acquire({});
    REQUIRE(a.ok());
    for (std::size_t i = 0; i < w.c.size(); ++i) redis_client(w.c[i]).command({"FLUSHALL"});
    REQUIRE(wait_until([&] { return w.lost.calls.load() > 0; }, 1500ms));
    std::this_thread::sleep_for(500ms);
    CHECK(w.lost.calls.load() == 1);
    CHECK(a.permit.lost());
  }

  TEST_CASE("after a normal release no extension reaches a node and no lost signal fires") {
    watched w("sem-release-stops", 2, {.expiry = 1s, .auto_extend_interval = 30ms});
    auto a = w.sem.try_acquire({});
    REQUIRE(a.ok());
    redis_client probe(w.c[0]);
    REQUIRE(wait_until([&] { return script_calls(probe) >= 5; }, 3s));  // it is extending
    const auto token = a.permit.lost_token();
    REQUIRE(a.permit.release({}).ok());
    for (std::size_t i = 0; i < w.c.size(); ++i) redis_client(w.c[i]).reset_stats();
    // Past the whole expiry: a leftover timer would extend, and a leftover
    // alarm would declare the permit lost.
    std::this_thread::sleep_for(1500ms);
    for (std::size_t i = 0; i < w.c.size(); ++i) {
      redis_client cl(w.c[i]);
      CHECK(script_calls(cl) == 0);
      CHECK_FALSE(cl.exists(semaphore_key(w.name)));
    }
    CHECK(w.lost.calls.load() == 0);
    CHECK_FALSE(a.permit.lost());
    CHECK_FALSE(token.stop_requested());
    CHECK(w.rs.stats().lost_permits == 0);
  }

  TEST_CASE("a held auto-extended permit destroyed is released, and its watchdog stops") {
    watched w("sem-drop", 1, {.expiry = 5s, .auto_extend_interval = 30ms});
    {
      auto a = w.sem.try_acquire({});
      REQUIRE(a.ok());
    }
    // Free again well before the 5 s expiry (which the watchdog would
    // otherwise push back forever): only the release explains it.
    redsync::acquire_result b;
    CHECK(wait_until(
        [&] {
          b = w.sem.try_acquire({});
          return b.ok();
        },
        2500ms));
    CHECK(b.permit.release({}).ok());
    for (std::size_t i = 0; i < w.c.size(); ++i)
      CHECK_FALSE(redis_client(w.c[i]).exists(semaphore_key(w.name)));
    CHECK(w.lost.calls.load() == 0);
  }

  TEST_CASE("max_extensions caps a permit's auto-extension, and the loss says so") {
    watched w("sem-cap", 1, {.expiry = 1s, .auto_extend_interval = 100ms, .max_extensions = 2});
    auto a = w.sem.try_acquire({});
    REQUIRE(a.ok());
    REQUIRE(wait_until([&] { return w.lost.calls.load() > 0; }, 4s));
    CHECK(w.lost.reason().find("max_extensions (2) reached") != std::string::npos);
    CHECK(w.rs.stats().permit_extensions.ok == 2);
  }

  TEST_CASE("max_hold caps a permit's auto-extension, and the loss says so") {
    watched w("sem-max-hold", 1, {.expiry = 1s, .auto_extend_interval = 100ms, .max_hold = 300ms});
    auto a = w.sem.try_acquire({});
    REQUIRE(a.ok());
    // Extended until 300 ms, then left to run out: lost within about an expiry.
    REQUIRE(wait_until([&] { return w.lost.calls.load() > 0; }, 4s));
    CHECK(a.permit.lost());
    CHECK(w.lost.calls.load() == 1);
    CHECK(w.lost.reason().find("max_hold (300 ms) reached") != std::string::npos);
    CHECK(a.permit.release({}).error == redsync::errc::lost);
    CHECK(w.rs.stats().lost_permits == 1);
  }

  TEST_CASE("bad auto-extension options are refused, naming the field and the value") {
    cluster c(1);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    CHECK_THROWS_WITH_AS(
        rs.new_semaphore("s", 2, {.expiry = 1s, .auto_extend_interval = 1s}),
        doctest::Contains("semaphore_options.auto_extend_interval = 1000 ms: must be less than expiry"),
        redsync::config_error);
    CHECK_THROWS_WITH_AS(rs.new_semaphore("s", 2, {.max_extensions = -1}),
                         doctest::Contains("semaphore_options.max_extensions = -1"), redsync::config_error);
    CHECK_THROWS_WITH_AS(rs.new_semaphore("s", 2, {.max_hold = -5ms}),
                         doctest::Contains("semaphore_options.max_hold = -5 ms"), redsync::config_error);
  }
}  // TEST_SUITE
