// Callbacks that run after a Redsync is gone: destroyed on its own
// (application-owned) loop's thread, the engine returns at once while its
// pools drain (up to shutdown_timeout) and are then closed, failing what is
// outstanding; destroyed from another thread, it is still there but has
// handed its pools over. Either way, a reply or a failure that arrives then
// must not reach into the engine (run under ASan: these were
// use-after-frees and out-of-range reads found by a lifetime review).
// lifetime_test.cpp and cluster_lifetime_test.cpp cover the rounds and the
// INFO listeners.

#include "app_loop.hpp"
#include "cluster_set.hpp"
#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_name_slot;
using namespace redsync::test;

namespace {

// The drain's bound in these tests: a frozen node's connection is closed
// (its outstanding commands fail with `shutdown`) this long after the
// Redsync is destroyed.
constexpr auto drain_bound = 1000ms;

long long permits_on(redsync::test::redis_server& s, const std::string& name) {
  return redis_client(s).command({"ZCARD", "redsync:sem:{" + name + "}"}).integer;
}

}  // namespace

TEST_SUITE_BEGIN("lifetime");

// The permit is let go right before its Redsync, both on the loop's thread:
// its release goes out first (a retried release per node), then the engine
// is destroyed. Node 2 is frozen past the drain's bound, so its release
// fails when the connection is closed, after the engine is gone; the
// release sender then asked the freed engine whether it was shutting down.
TEST_CASE("a permit release that fails after its Redsync is gone touches nothing freed") {
  cluster c(3);
  app_loop app;
  const auto name = unique_name("permit-after-gone");
  std::optional<redsync::Redsync> rs;
  // Made before the loop runs: libuv handles are created on the loop's
  // thread or while nobody runs it.
  rs.emplace(c.uris(), fresh_nodes({.loop = app.get(), .shutdown_timeout = drain_bound}));
  app.run();
  // A command timeout (20 s * 0.2) past the drain's bound: node 2's release
  // fails when its connection is closed, not by timing out.
  auto sem = std::make_unique<redsync::Semaphore>(
      rs->new_semaphore(name, 2, {.expiry = 20s, .timeout_factor = 0.2}));
  {
    // Every node caches the release script first: a frozen node later runs
    // the EVALSHA from its closed socket (no EVAL follows a NOSCRIPT there).
    auto warm = sem->acquire(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(warm.ok(), warm.describe());
    REQUIRE(warm.permit.release(redsync::context::timeout(5s)).ok());
  }
  auto got = sem->acquire(redsync::context::timeout(5s));
  REQUIRE_MESSAGE(got.ok(), got.describe());
  auto p = std::make_unique<redsync::permit>(std::move(got.permit));
  for (std::size_t i = 0; i < c.size(); ++i) REQUIRE(permits_on(c[i], name) == 1);
  c[2].pause();
  REQUIRE(app.call(
      [&] {
        p.reset();  // its release is posted before the engine's destruction
        sem.reset();
        rs.reset();
      },
      3s));
  // Nodes 0 and 1 answer the release during the drain.
  CHECK(wait_until([&] { return permits_on(c[0], name) == 0 && permits_on(c[1], name) == 0; }, 3s));
  // The bound passes: node 2's connection is closed, its release fails.
  std::this_thread::sleep_for(drain_bound + 1s);
  // Woken, node 2 runs the release from its closed socket.
  c[2].resume();
  CHECK(wait_until([&] { return permits_on(c[2], name) == 0; }, 5s));
  CHECK(app.stop(10s));  // nothing of the Redsync's is left on the loop
}

// A multi-name lock whose names are in two slots sends one call per slot
// group to a cluster member and combines the groups' answers into the
// member's vote; where not every group won, the combiner undoes the groups
// at once. With the cluster's masters frozen, the groups' answers fail
// only when the connections are closed after the drain: by then the engine
// has handed its pools over (destroyed from another thread) or is gone
// (destroyed on its loop's thread), and the combiner sent the undo through
// it (an out-of-range read of its pools, or a use-after-free).
TEST_CASE(
    "a multi-name lock's slot groups that fail on a cluster member after its Redsync shut down send no undo "
    "through it") {
  for (const bool on_loop_thread : {true, false}) {
    CAPTURE(on_loop_thread);
    redis_cluster cl(cluster_config{.masters = 3, .node_timeout_ms = 20000});
    cluster standalone(2);
    const std::vector<std::string> set{cl.uri(), standalone[0].uri(), standalone[1].uri()};
    app_loop app;
    const auto names = names_in_distinct_slots(unique_name("groups-after-gone"), 2);
    std::optional<redsync::Redsync> rs;
    rs.emplace(set, fresh_nodes({.loop = app.get(), .shutdown_timeout = drain_bound}));
    app.run();
    {
      // The names' slots are surveyed first, so the round below goes out.
      auto warm = rs->new_multi_mutex(names);
      REQUIRE(warm.lock(redsync::context::timeout(10s)).ok());
      REQUIRE(warm.unlock(redsync::context::timeout(10s)).ok());
    }
    // A command timeout (20 s * 0.2) past the drain's bound: the groups
    // fail when the connections are closed, not by timing out.
    auto m = std::make_unique<redsync::Mutex>(
        rs->new_multi_mutex(names, {.expiry = 20s, .tries = 1, .timeout_factor = 0.2}));
    for (std::size_t i = 0; i < cl.size(); ++i) cl[i].pause();
    std::promise<redsync::result> answered;
    m->lock_async(redsync::context{}, [&](redsync::result r) { answered.set_value(std::move(r)); });
    // The standalone nodes answer; the cluster member's groups wait.
    REQUIRE(wait_until(
        [&] {
          for (std::size_t i = 0; i < standalone.size(); ++i)
            for (const auto& n : names)
              if (!redis_client(standalone[i]).exists(n)) return false;
          return true;
        },
        5s));
    if (on_loop_thread) {
      REQUIRE(app.call(
          [&] {
            m.reset();
            rs.reset();
          },
          3s));
      // The bound passes and the member's connections are closed.
      std::this_thread::sleep_for(drain_bound + 1s);
    } else {
      m.reset();
      rs.reset();  // waits for the drain's bound, then for the closing
    }
    auto f = answered.get_future();
    REQUIRE(f.wait_for(5s) == std::future_status::ready);
    CHECK_FALSE(f.get().ok());
    for (std::size_t i = 0; i < cl.size(); ++i) cl[i].resume();
    // The abandon's release reached the standalone nodes.
    for (std::size_t i = 0; i < standalone.size(); ++i)
      for (const auto& n : names)
        CHECK_MESSAGE(wait_until([&] { return !redis_client(standalone[i]).exists(n); }, 5s), "node ", i);
    CHECK(app.stop(10s));  // nothing of the Redsync's is left on the loop
  }
}

TEST_SUITE_END();
