// Wake-ups on cluster members (docs/cluster.md, "Wake-ups"): a waiter is
// woken by the release's SPUBLISH on its name's sharded channel, heard by an
// SSUBSCRIBE on the master that serves the channel's slot, and that
// subscription follows the slot through a failover and a migration. Real
// clusters throughout.
//
// How each test tells a wake-up from a retry: the waiter's retry delay is
// 20 s and its command timeout 20 s (expiry 40 s, timeout_factor 0.5), so
// as the head of the line it looks again on its own only every 20 s (the
// head's refresh is the command timeout plus 250 ms, waiting_line.hpp).
// Acquiring within 8 s of the release takes a wake-up from a quorum of
// members.
#include "cluster_set.hpp"
#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/function_library.hpp"
#include "redlock/scripts/scripts.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using redsync::detail::key_slot;
using redsync::detail::line_key;
using redsync::detail::release_channel;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr auto woken_within = 8s;

redsync::mutex_options slow_waiter() {
  return {.expiry = 40s, .tries = 1000, .retry_delay = [](int) { return 20000ms; }, .timeout_factor = 0.5};
}

// Waiters with a sharded subscription to `name`'s releases (each on its own
// channel, the release channel, ':', SHA1 of its value) on master `node`.
long long shard_subscribers(redis_cluster& cl, std::size_t node, const std::string& name) {
  return waiter_channels(cl[node], release_channel(cluster_lock_key(name)), true);
}

// The same on the master that serves the name's slot now.
long long shard_subscribers(redis_cluster& cl, const std::string& name) {
  return shard_subscribers(cl, cl.owner(cluster_name_slot(name)), name);
}

long long cluster_waiting(redis_cluster& cl, const std::string& name) {
  const std::string line = line_key(cluster_lock_key(name));
  return redis_client(cl[cl.owner(key_slot(line))]).command({"ZCARD", line}).integer;
}

long long standalone_waiting(redsync::test::redis_server& s, const std::string& name) {
  return redis_client(s).command({"ZCARD", line_key(name)}).integer;
}

long long standalone_subscribers(redsync::test::redis_server& s, const std::string& name) {
  return waiter_channels(s, release_channel(name));
}

// A holder (`holding`'s) with the lock, and a slow waiter (`waiting`'s)
// queued behind it.
struct hold_and_wait {
  redsync::Mutex holder;
  redsync::Mutex waiter;
  std::future<redsync::result> waiting;
};

hold_and_wait hold_then_wait(redsync::Redsync& holding, redsync::Redsync& waiting, const std::string& name,
                             redsync::mutex_options holder_options) {
  auto holder = holding.new_mutex(name, std::move(holder_options));
  auto r = holder.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  auto waiter = waiting.new_mutex(name, slow_waiter());
  auto f = waiter.lock_future();
  return {std::move(holder), std::move(waiter), std::move(f)};
}

// Releases the holder; checks that the waiter got the lock well before its
// retry delay, then lets go of it.
void release_and_expect_wakeup(hold_and_wait& w) {
  const auto released = clock_type::now();
  auto u = w.holder.unlock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(u.ok(), u.describe());
  REQUIRE(w.waiting.wait_for(2 * woken_within) == std::future_status::ready);
  const auto took = clock_type::now() - released;
  auto r = w.waiting.get();
  REQUIRE_MESSAGE(r.ok(), r.describe());
  CHECK(took < woken_within);
  CHECK(w.waiter.unlock(redsync::context::timeout(10s)).ok());
}

// Locks and unlocks `probe` once; true when every member's vote counted.
bool every_member_votes(redsync::Mutex& probe) {
  auto r = probe.lock(redsync::context::timeout(20s));
  if (!r.ok()) return false;
  bool all = true;
  for (const auto& n : r.nodes) all = all && n.status == redsync::node_status::ok;
  (void)probe.unlock(redsync::context::timeout(5s));
  return all;
}

// A waiter over {cluster `cl`, one standalone node} waits while `move`
// moves its name's slot to another master of `cl` (and returns that
// master); its subscription must follow, and the release wake it. Two
// members: the release must be heard on both, the cluster included.
void wakeup_after_slot_move(redis_cluster& cl, const std::string& name,
                            const std::function<std::size_t(std::size_t from)>& move) {
  redsync::test::cluster standalone(1);
  const std::vector<std::string> uris{cl.uri(), standalone[0].uri()};
  redsync::Redsync holding(uris, fresh_nodes());
  redsync::Redsync waiting(uris, fresh_nodes());
  // After the move the member votes for the slot again only once its record
  // was repaired, at least the longest expiry in use after (docs/cluster.md):
  // the holder keeps a short expiry alive by extending it, so its lock
  // outlives that repair.
  auto w = hold_then_wait(holding, waiting, name, {.expiry = 6s, .auto_extend = true});
  const std::size_t from = cl.owner(cluster_name_slot(name));
  REQUIRE(wait_until(
      [&] {
        return cluster_waiting(cl, name) == 1 && shard_subscribers(cl, from, name) == 1 &&
               standalone_subscribers(standalone[0], name) == 1;
      },
      10s));

  const std::size_t to = move(from);
  REQUIRE(to != from);
  // The old master ended the subscription (sunsubscribe); the listener made
  // it again on the new one.
  CHECK(wait_until([&] { return shard_subscribers(cl, to, name) == 1; }, 20s));
  CHECK(shard_subscribers(cl, from, name) == 0);

  // Both clients count the member's vote for the slot again (the holder's
  // repairs its record, then the waiter's reads it verified) before the
  // release, so the woken attempt can win.
  const std::string probe_name = "{" + name + "}:probe";
  REQUIRE(cluster_name_slot(probe_name) == cluster_name_slot(name));
  auto probe_h = holding.new_mutex(probe_name, {.expiry = 1s, .tries = 100000});
  REQUIRE(wait_until([&] { return every_member_votes(probe_h); }, 40s));
  auto probe_w = waiting.new_mutex(probe_name, {.expiry = 1s, .tries = 100000});
  REQUIRE(wait_until([&] { return every_member_votes(probe_w); }, 40s));
  CHECK(w.holder.held());
  release_and_expect_wakeup(w);
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

TEST_CASE("a waiter over three cluster members is woken by the release, long before its 20 s retry delay") {
  std::vector<std::unique_ptr<redis_cluster>> cls;
  for (int i = 0; i < 3; ++i) cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3}));
  const std::vector<std::string> uris{cls[0]->uri(), cls[1]->uri(), cls[2]->uri()};
  redsync::Redsync holding(uris, fresh_nodes());
  redsync::Redsync waiting(uris, fresh_nodes());
  const std::string name = unique_name("cluster-wake");
  auto w = hold_then_wait(holding, waiting, name, {.expiry = 30s});
  REQUIRE(wait_until(
      [&] {
        for (auto& cl : cls)
          if (cluster_waiting(*cl, name) != 1 || shard_subscribers(*cl, name) != 1) return false;
        return true;
      },
      10s));
  // Sharded: the other masters of each cluster hear nothing of it.
  for (auto& cl : cls) {
    long long elsewhere = 0;
    for (std::size_t k = 0; k < 3; ++k)
      if (k != cl->owner(cluster_name_slot(name))) elsewhere += shard_subscribers(*cl, k, name);
    CHECK(elsewhere == 0);
  }
  release_and_expect_wakeup(w);
  // The waiter stopped listening: its subscriptions are gone.
  CHECK(wait_until(
      [&] {
        for (auto& cl : cls)
          if (shard_subscribers(*cl, name) != 0) return false;
        return true;
      },
      5s));
}

TEST_CASE("functions mode: a waiter over a mixed set (one cluster, two standalone nodes) is woken") {
  redis_cluster cl(cluster_config{.masters = 3});
  redsync::test::cluster standalone(2);
  redsync::redsync_options opts = fresh_nodes();
  opts.script_mode = redsync::script_mode::functions;
  const std::vector<std::string> uris{cl.uri(), standalone[0].uri(), standalone[1].uri()};
  redsync::Redsync holding(uris, opts);
  redsync::Redsync waiting(uris, opts);
  const std::string name = unique_name("cluster-wake-fn");
  auto w = hold_then_wait(holding, waiting, name, {.expiry = 30s});
  REQUIRE(wait_until(
      [&] {
        return cluster_waiting(cl, name) == 1 && shard_subscribers(cl, name) == 1 &&
               standalone_waiting(standalone[0], name) == 1 &&
               standalone_subscribers(standalone[0], name) == 1 &&
               standalone_waiting(standalone[1], name) == 1 &&
               standalone_subscribers(standalone[1], name) == 1;
      },
      10s));
  // The cluster member runs the cluster variant's library, a standalone
  // node the standalone one.
  const auto libraries = [](redsync::test::redis_server& s, const redsync::detail::lua_script& script) {
    return redis_client(s)
        .command({"FUNCTION", "LIST", "LIBRARYNAME", redsync::detail::function_name(script)})
        .elements.size();
  };
  const auto& acquire = redsync::detail::acquire_script();
  auto& slot_master = cl[cl.owner(cluster_name_slot(name))];
  CHECK(libraries(slot_master, *acquire.cluster) == 1);
  CHECK(libraries(slot_master, acquire) == 0);
  CHECK(libraries(standalone[0], acquire) == 1);
  CHECK(libraries(standalone[0], *acquire.cluster) == 0);
  release_and_expect_wakeup(w);
}

TEST_CASE("a waiter's subscription follows its slot through a failover, and the waiter is woken") {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  wakeup_after_slot_move(cl, unique_name("cluster-wake-failover"),
                         [&](std::size_t master) { return fail_over_to_replica(cl, master); });
}

TEST_CASE("a waiter's subscription follows its slot to another master after a migration") {
  redis_cluster cl(cluster_config{.masters = 3});
  const std::string name = unique_name("cluster-wake-migration");
  wakeup_after_slot_move(cl, name, [&](std::size_t from) {
    const std::uint16_t slot = cluster_name_slot(name);
    const std::size_t to = (from + 1) % 3;
    cl.begin_migration(slot, from, to);
    cl.migrate_keys(slot, from, to);
    cl.finish_migration(slot, to);
    return to;
  });
}

TEST_SUITE_END();
