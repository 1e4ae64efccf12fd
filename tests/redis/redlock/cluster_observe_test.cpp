// What a Redsync tells about a cluster member's shards (its masters) and its
// router (docs/observability.md, "Cluster members"), against real local
// clusters: the answers, events and counters name the right master, a
// failover and a migration show up in the router's counters, and the
// Prometheus text carries the shard labels.
#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using namespace redsync::test;

namespace {

struct seen_event {
  std::size_t node = 0;
  redsync::node_state state{};
  std::string detail;
  std::string shard;
};

// Keeps every node event (they arrive on the loop thread).
struct node_recorder : redsync::observer {
  mutable std::mutex mu;
  std::vector<seen_event> events;
  void on_node(const redsync::node_event& e) override {
    std::lock_guard lk(mu);
    events.push_back({e.node, e.state, std::string(e.detail), std::string(e.shard)});
  }
  // The first event of node `node` in `state` about shard `shard`, if any.
  std::optional<seen_event> find(std::size_t node, redsync::node_state state,
                                 const std::string& shard) const {
    std::lock_guard lk(mu);
    for (const auto& e : events)
      if (e.node == node && e.state == state && e.shard == shard) return e;
    return std::nullopt;
  }
};

const redsync::shard_stats* shard_in(const redsync::node_stats& n, const std::string& address) {
  for (const auto& s : n.shards)
    if (s.address == address) return &s;
  return nullptr;
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

TEST_CASE("a cluster member's answers, events and stats name the master of the name's slot") {
  redis_cluster cl(cluster_config{.masters = 3});
  redis_server a, b;
  auto rec = std::make_shared<node_recorder>();
  redsync::redsync_options opts = fresh_nodes();
  opts.observer = rec;
  redsync::Redsync rs({cl.uri(), a.uri(), b.uri()}, opts);
  const std::string name = unique_name("observe-shard");
  const std::string owner = cl[cl.owner(cluster_name_slot(name))].address();
  auto m = rs.new_mutex(name, {.expiry = 5s});
  auto r = m.lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  REQUIRE(r.nodes.size() == 3);
  CHECK(r.nodes[0].shard == owner);
  CHECK(r.nodes[1].shard.empty());  // a standalone node has no shard
  REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());

  const redsync::stats_snapshot s = rs.stats();
  REQUIRE(s.nodes.size() == 3);
  const redsync::node_stats& c = s.nodes[0];
  CHECK(c.cluster);
  CHECK_FALSE(s.nodes[1].cluster);
  CHECK(s.nodes[1].shards.empty());
  CHECK(c.connected);
  CHECK(c.router.masters == 3);
  CHECK(c.router.map_reads >= 1);
  CHECK(c.router.failovers == 0);
  REQUIRE(c.shards.size() == 3);
  for (std::size_t k = 0; k < 3; ++k) CHECK(shard_in(c, cl[k].address()) != nullptr);
  const redsync::shard_stats* sh = shard_in(c, owner);
  REQUIRE(sh != nullptr);
  // The lock and the unlock, both on the slot's master, none elsewhere:
  // every answer of the member is the owner's.
  const std::uint64_t oks = sh->answers_with(redsync::node_status::ok);
  CHECK(oks >= 2);
  CHECK(c.answers_with(redsync::node_status::ok) == oks);
  CHECK(sh->latency.count() == c.latency.count());
  CHECK(sh->connected);
  for (const auto& other : c.shards)
    if (other.address != owner) CHECK(other.answers_with(redsync::node_status::ok) == 0);

  // The master's first connection is an event about that shard.
  CHECK(wait_until([&] { return rec->find(0, redsync::node_state::connected, owner).has_value(); }, 5s));
  // A standalone node's events name no shard.
  CHECK(wait_until([&] { return rec->find(1, redsync::node_state::connected, "").has_value(); }, 5s));

  const std::string text = redsync::prometheus_text(s);
  const std::string member = "node=\"" + c.address + "\"";
  CHECK(text.find("redsync_shard_answers_total{" + member + ",shard=\"" + owner + "\",status=\"ok\"} " +
                  std::to_string(oks)) != std::string::npos);
  CHECK(text.find("redsync_shard_latency_seconds_count{" + member + ",shard=\"" + owner + "\"} " +
                  std::to_string(sh->latency.count())) != std::string::npos);
  CHECK(text.find("redsync_cluster_masters{" + member + "} 3") != std::string::npos);
  CHECK(text.find("redsync_cluster_failovers_total{" + member + "} 0") != std::string::npos);
  // Masters, never slots: one connected gauge per master.
  std::size_t gauges = 0;
  for (auto at = text.find("redsync_shard_connected{"); at != std::string::npos;
       at = text.find("redsync_shard_connected{", at + 1))
    ++gauges;
  CHECK(gauges == 3);
}

TEST_CASE("a slot migration shows as ASK, TRYAGAIN and then MOVED in the router's counters") {
  redis_cluster cl(cluster_config{.masters = 3});
  redis_server a, b;
  redsync::Redsync rs({cl.uri(), a.uri(), b.uri()}, fresh_nodes());
  const std::string name = unique_name("observe-moved");
  const std::uint16_t slot = cluster_name_slot(name);
  const std::size_t from = cl.owner(slot);
  const std::size_t to = (from + 1) % 3;
  auto m = rs.new_mutex(name, {.expiry = 30s});
  auto r = m.lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  const auto before = rs.stats().nodes[0].router;
  CHECK(before.moved == 0);
  CHECK(before.ask == 0);
  CHECK(before.tryagain == 0);

  // Mid-migration the key has left: the source says ASK, the importing
  // master TRYAGAIN (the line and leases are nowhere).
  cl.begin_migration(slot, from, to);
  cl.migrate_keys(slot, from, to, {cluster_lock_key(name)});
  auto u = m.unlock(redsync::context::timeout(10s));
  CHECK_MESSAGE(u.ok(), u.describe());
  REQUIRE(u.nodes.size() == 3);
  CHECK(u.nodes[0].message.find("TRYAGAIN") != std::string::npos);
  CHECK(u.nodes[0].shard == cl[to].address());  // the answer came from the importing master
  const auto during = rs.stats().nodes[0].router;
  CHECK(during.ask >= 1);
  CHECK(during.tryagain >= 1);
  CHECK(during.moved == 0);

  cl.migrate_keys(slot, from, to);  // the rest of the slot (its node record), as a reshard does
  cl.finish_migration(slot, to);
  // The next lock goes to the old owner (the map says so), is MOVED, and is
  // answered by the new one.
  auto r2 = m.lock(redsync::context::timeout(15s));
  REQUIRE_MESSAGE(r2.ok(), r2.describe());
  CHECK(r2.nodes[0].shard == cl[to].address());
  const auto after = rs.stats().nodes[0].router;
  CHECK(after.moved >= 1);
  CHECK(after.failovers == 0);  // a migration is no failover
  const std::string text = redsync::prometheus_text(rs.stats());
  CHECK(text.find("redsync_cluster_redirects_total{node=\"" + rs.stats().nodes[0].address +
                  "\",kind=\"moved\"} " + std::to_string(after.moved)) != std::string::npos);
  (void)m.unlock(redsync::context::timeout(5s));
}

TEST_CASE(
    "a killed master whose replica is promoted counts one failover and tells events about both shards") {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  redis_server a, b;
  auto rec = std::make_shared<node_recorder>();
  redsync::redsync_options opts;
  opts.restart_guard = true;
  opts.restart_guard_window = 1500ms;
  opts.observer = rec;
  redsync::Redsync rs({cl.uri(), a.uri(), b.uri()}, opts);
  const std::string name = unique_name("observe-failover");
  auto m = rs.new_mutex(name, {.expiry = 1s, .tries = 100000});
  const auto lock_once = [&] {
    auto r = m.lock(redsync::context::timeout(20s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    (void)m.unlock(redsync::context::timeout(5s));
    return r;
  };
  // Every member votes once its guard window passed.
  REQUIRE(wait_until(
      [&] {
        auto r = lock_once();
        return r.nodes[0].status == redsync::node_status::ok;
      },
      20s));
  const std::size_t master = cl.owner(cluster_name_slot(name));
  const std::string old_master = cl[master].address();
  const std::string promoted = cl[master + 3].address();  // the fixture's replica of `master`
  {
    redis_client c(cl[master]);
    REQUIRE(c.command({"WAIT", "1", "5000"}).integer == 1);
  }
  CHECK(rs.stats().nodes[0].router.failovers == 0);
  cl[master].kill();

  // Locking goes on (the standalone nodes); the member finds the promoted
  // replica through the map.
  CHECK(wait_until(
      [&] {
        (void)lock_once();
        return rs.stats().nodes[0].router.failovers >= 1;
      },
      20s));
  const redsync::node_stats s = rs.stats().nodes[0];
  CHECK(s.router.failovers == 1);
  CHECK(s.router.masters == 3);
  CHECK(shard_in(s, promoted) != nullptr);
  CHECK(shard_in(s, old_master) == nullptr);  // it left the map: forgotten
  // The old master went down, the shard got a new master ...
  CHECK(
      wait_until([&] { return rec->find(0, redsync::node_state::unreachable, old_master).has_value(); }, 5s));
  const auto failover = rec->find(0, redsync::node_state::failover, promoted);
  REQUIRE(failover.has_value());
  CHECK(failover->detail == old_master);
  // ... whose yes is distrusted (its record names the old master) until
  // repaired and past the guard window.
  CHECK(wait_until(
      [&] {
        (void)lock_once();
        return rec->find(0, redsync::node_state::excluded, promoted).has_value();
      },
      10s));
  const std::string text = redsync::prometheus_text(rs.stats());
  CHECK(text.find("redsync_cluster_failovers_total{node=\"" + s.address + "\"} 1") != std::string::npos);
  CHECK(text.find("shard=\"" + promoted + "\"") != std::string::npos);
  CHECK(text.find("shard=\"" + old_master + "\"") == std::string::npos);
}

TEST_SUITE_END();
