// A Redsync with cluster members destroyed while calls are in flight, on
// the application's own loop thread (lifetime_test.cpp covers standalone
// members).
#include "app_loop.hpp"
#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <uv.h>

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

using namespace std::chrono_literals;
using namespace redsync::test;

// The router hands each INFO reply of a cluster member (a connection's
// handshake, a read_identity) to the engine's listener. An engine destroyed
// on its own loop thread is gone while its connections drain, so replies
// answered by masters resumed after the destruction (the round's script,
// the abandon's release, and, when the router still read INFO before every
// call, those INFOs) must not reach it (they did: a use-after-free found by
// an attack review; ASan or valgrind show it).
TEST_CASE(
    "a Redsync with a cluster member destroyed on its own loop thread mid-round: INFO replies during the "
    "drain "
    "reach nothing freed") {
  redis_cluster cl(cluster_config{.masters = 3, .node_timeout_ms = 20000});
  app_loop app;
  const auto name = unique_name("cluster-destroyed-on-loop");
  std::optional<redsync::Redsync> rs;
  rs.emplace(std::vector<std::string>{cl.uri()},
             fresh_nodes({.loop = app.get(), .shutdown_timeout = 3000ms}));
  app.run();
  auto m = std::make_unique<redsync::Mutex>(
      rs->new_mutex(name, {.expiry = 20s, .tries = 1, .timeout_factor = 0.2}));
  {
    auto warm = rs->new_mutex(name);  // the same slot: surveyed before the round below
    REQUIRE(warm.lock(redsync::context::timeout(5s)).ok());
    REQUIRE(warm.unlock(redsync::context::timeout(5s)).ok());
    // Every master's record surveyed: lock each range's name once.
    for (int k = 0; k < 40; ++k) {
      auto w = rs->new_mutex(name + "-w" + std::to_string(k));
      REQUIRE(w.lock(redsync::context::timeout(5s)).ok());
      REQUIRE(w.unlock(redsync::context::timeout(5s)).ok());
    }
  }
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].pause();
  std::promise<redsync::result> answered;
  m->lock_async(redsync::context{}, [&](redsync::result r) { answered.set_value(std::move(r)); });
  std::this_thread::sleep_for(300ms);  // INFO + script written into the paused master's socket
  REQUIRE(app.reset(3s, m, rs));
  for (std::size_t i = 0; i < cl.size(); ++i) cl[i].resume();
  auto f = answered.get_future();
  REQUIRE(f.wait_for(5s) == std::future_status::ready);
  std::this_thread::sleep_for(1500ms);  // the drain's answers (INFO first) arrive
  CHECK(app.stop(10s));                 // nothing of the Redsync's is left on the loop
}

// Durable mode, a MOVED: the script follows the redirection to the new
// owner, the WAIT behind it is answered by the old one. Expected (docs): a
// non-vote naming both, and the SET on the new owner undone.
