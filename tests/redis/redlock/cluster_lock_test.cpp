// A Mutex over cluster members (docs/cluster.md): every member a whole local
// Redis Cluster, or a mix of clusters and standalone nodes, against real
// servers. The keys are the cluster layout ({NAME}, redsync:node:{T}).
#include "cluster_set.hpp"
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
#include <string>
#include <thread>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using redsync::detail::cluster_record_key;
using namespace redsync::test;

TEST_SUITE_BEGIN("cluster");

TEST_CASE("a mutex locks, extends and unlocks over three cluster members (each 3 masters)") {
  auto cls = three_master_clusters(3);
  const std::vector<std::string> uris{cls[0]->uri(), cls[1]->uri(), cls[2]->uri()};
  redsync::Redsync rs(uris, fresh_nodes());
  REQUIRE(rs.node_count() == 3);
  const std::string name = unique_name("cluster-lock");
  auto m = rs.new_mutex(name, {.expiry = 3s});
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  for (const auto& n : r.nodes) CHECK(n.status == redsync::node_status::ok);
  const std::string key = cluster_lock_key(name);
  CHECK(key == "{" + name + "}");
  const std::string record = cluster_record_key(cluster_name_slot(name));
  for (auto& cl : cls) {
    CHECK(value_on(*cl, key) == m.value());
    redis_client c((*cl)[cl->owner(redsync::detail::key_slot(record))]);
    CHECK(c.command({"HEXISTS", record, "fence"}).integer == 1);  // the slot's node record
  }
  CHECK(m.token().value > 0);

  // Another client of the same set is kept out.
  redsync::Redsync other(uris, fresh_nodes());
  auto m2 = other.new_mutex(name, {.expiry = 3s});
  auto busy = m2.try_lock(redsync::context::timeout(10s));
  CHECK(busy.error == redsync::errc::busy);

  auto e = m.extend(redsync::context::timeout(10s));
  CHECK_MESSAGE(e.ok(), e.describe());
  auto u = m.unlock(redsync::context::timeout(10s));
  CHECK_MESSAGE(u.ok(), u.describe());
  for (auto& cl : cls) CHECK(value_on(*cl, key).empty());

  // Now the other client gets it, with a larger token.
  auto r2 = m2.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r2.ok(), r2.describe());
  CHECK(m2.token().value > m.token().value);
  CHECK(m2.unlock(redsync::context::timeout(10s)).ok());
}

// Was slow (issue 32, item 4): every slot no lock had used cost a whole
// guard window (its record was repaired, then kept out for the window), on
// a fresh set and on members that had served other slots for long: the
// first lock of a free name took 8 s with the CLI's default expiry. A
// record no member has a counter in is now stamped as verified at once
// (node_trust.hpp, "Never used").
TEST_CASE(
    "with the restart guard on, a name in a slot no lock used gets its first lock at once, on a fresh set "
    "and after other slots served locks") {
  auto cls = three_master_clusters(3);
  const std::vector<std::string> uris{cls[0]->uri(), cls[1]->uri(), cls[2]->uri()};
  const auto names = redsync::test::names_in_distinct_slots(unique_name("fresh-slot"), 3);
  constexpr auto window = 8s;  // the expiry, so the guard window
  auto first_lock = [&](redsync::Redsync& rs, const std::string& name) {
    auto m = rs.new_mutex(name, {.expiry = window, .tries = 100, .retry_delay = [](int) { return 50ms; }});
    const auto started = std::chrono::steady_clock::now();
    auto r = m.lock(redsync::context::timeout(20s));
    const auto took = std::chrono::steady_clock::now() - started;
    REQUIRE_MESSAGE(r.ok(), r.describe());
    for (const auto& n : r.nodes) CHECK_MESSAGE(n.status == redsync::node_status::ok, r.describe());
    // Generous: well under the guard window that each slot used to cost.
    CHECK_MESSAGE(took < window / 2, name, ": ", std::chrono::duration<double>(took).count(), " s");
    CHECK(m.unlock(redsync::context::timeout(10s)).ok());
  };
  redsync::Redsync rs(uris);  // restart guard on (the default)
  first_lock(rs, names[0]);   // a brand-new set
  first_lock(rs, names[1]);   // another slot, after the first served a lock
  redsync::Redsync later(uris);
  first_lock(later, names[2]);  // a client that never met the set
}

TEST_CASE("auto-extension keeps a lock over cluster members past its expiry") {
  auto cls = three_master_clusters(3);
  redsync::Redsync rs({cls[0]->uri(), cls[1]->uri(), cls[2]->uri()}, fresh_nodes());
  const std::string name = unique_name("cluster-auto");
  auto m = rs.new_mutex(name, {.expiry = 1500ms, .auto_extend = true});  // see cluster_multi_test.cpp
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  std::this_thread::sleep_for(4000ms);  // past two expiries
  CHECK(m.held());
  for (auto& cl : cls) CHECK(value_on(*cl, cluster_lock_key(name)) == m.value());
  CHECK(m.unlock(redsync::context::timeout(10s)).ok());
}

namespace {

// The reasons of every `excluded` event of node `node`.
struct exclusion_recorder : redsync::observer {
  explicit exclusion_recorder(std::size_t n) : node(n) {}
  std::size_t node;
  std::mutex mu;
  std::vector<std::string> reasons;
  void on_node(const redsync::node_event& e) override {
    if (e.node != node || e.state != redsync::node_state::excluded) return;
    std::lock_guard lk(mu);
    reasons.emplace_back(e.detail);
  }
};

}  // namespace

// The same servers, two ways: their own layouts, and (issue 32) a node of
// the cluster listed as redis://, which used to answer CROSSSLOT silently.
TEST_CASE(
    "a mixed set: one cluster member and two standalone nodes, each in its own key layout; a node of the "
    "cluster listed as redis:// never votes, and the result and the observer name redis+cluster://") {
  redis_cluster cl(cluster_config{.masters = 3});
  redsync::test::cluster standalone(2);
  redsync::Redsync rs({cl.uri(), standalone[0].uri(), standalone[1].uri()}, fresh_nodes());
  const std::string name = unique_name("mixed");
  auto m = rs.new_mutex(name, {.expiry = 3s});
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  for (const auto& n : r.nodes) CHECK(n.status == redsync::node_status::ok);
  CHECK(value_on(cl, cluster_lock_key(name)) == m.value());
  for (std::size_t i = 0; i < 2; ++i) {
    redis_client c(standalone[i]);
    CHECK(c.get(name) == m.value());  // standalone names are today's
    CHECK_FALSE(c.get(cluster_lock_key(name)).has_value());
  }
  CHECK(m.unlock(redsync::context::timeout(10s)).ok());
  redis_client c(standalone[0]);
  CHECK_FALSE(c.get(name).has_value());
  CHECK(value_on(cl, cluster_lock_key(name)).empty());

  // Node 2 is a master of the cluster, listed as a standalone node. Its
  // first contact (the handshake's INFO) tells; no construction can.
  auto rec = std::make_shared<exclusion_recorder>(1);
  redsync::redsync_options opts = fresh_nodes();
  opts.observer = rec;
  const std::string node = cl[0].address();
  redsync::Redsync wrong({standalone[0].uri(), "redis://" + node, standalone[1].uri()}, opts);
  const std::string why = "node 2 (redis://" + node + ") is a Redis Cluster node (cluster_enabled:1): ";
  const std::string advice = "list it as redis+cluster://" + node + " ";
  auto w = wrong.new_mutex(unique_name("cluster-node-as-standalone"), {.expiry = 3s});
  auto got = w.try_lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(got.ok(), got.describe());  // the two others are a quorum of 3
  REQUIRE(got.nodes.size() == 3);
  CHECK(got.nodes[0].status == redsync::node_status::ok);
  CHECK(got.nodes[1].status == redsync::node_status::excluded);
  CHECK(got.nodes[1].message.starts_with(why));
  CHECK(got.nodes[1].message.find(advice) != std::string::npos);
  CHECK(got.nodes[2].status == redsync::node_status::ok);
  {
    std::lock_guard lk(rec->mu);
    REQUIRE(rec->reasons.size() == 1);  // said once, when it starts
    CHECK(rec->reasons[0] == got.nodes[1].message);
  }
  CHECK(w.unlock(redsync::context::timeout(10s)).ok());
  // Without a standalone node: its one vote of 3, and the failure says why.
  standalone[1].kill();
  auto lone = wrong.new_mutex(unique_name("cluster-node-as-standalone"), {.expiry = 3s});
  auto failed = lone.try_lock(redsync::context::timeout(10s));
  CHECK_FALSE(failed.ok());
  REQUIRE(failed.nodes.size() == 3);
  CHECK(failed.nodes[1].status == redsync::node_status::excluded);
  CHECK(failed.nodes[1].message.starts_with(why));
  CHECK(failed.describe().find(advice) != std::string::npos);
}

TEST_CASE(
    "a lock held across a slot migration is released: TRYAGAIN is no answer, retried until the move ends") {
  auto cls = three_master_clusters(3);
  redsync::Redsync rs({cls[0]->uri(), cls[1]->uri(), cls[2]->uri()}, fresh_nodes());
  const std::string name = unique_name("cluster-migrating");
  const std::string key = cluster_lock_key(name);
  auto m = rs.new_mutex(name, {.expiry = 30s});
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  const std::string value = m.value();
  redis_cluster& cl = *cls[0];
  const std::uint16_t slot = cluster_name_slot(name);
  const std::size_t from = cl.owner(slot);
  const std::size_t to = (from + 1) % 3;
  // The lock key left for `to`; its line and leases exist nowhere: the
  // importing master answers the release with TRYAGAIN.
  cl.begin_migration(slot, from, to);
  cl.migrate_keys(slot, from, to, {key});
  auto u = m.unlock(redsync::context::timeout(10s));
  CHECK_MESSAGE(u.ok(), u.describe());  // the two other members
  REQUIRE(u.nodes.size() == 3);
  CHECK(u.nodes[0].status != redsync::node_status::ok);
  CHECK(u.nodes[0].message.find("TRYAGAIN") != std::string::npos);
  redis_client importing(cl[to]);
  REQUIRE(importing.command({"ASKING"}).str == "OK");
  CHECK(importing.get(key) == value);  // not released there yet
  // The rest of the slot (the member's node record) follows before the
  // move ends: a master refuses to give up a slot it still holds keys of.
  cl.migrate_keys(slot, from, to);
  cl.finish_migration(slot, to);
  // The background retry lands once the slot has moved, long before the
  // key's 30 s expiry.
  CHECK(wait_until([&] { return !importing.get(key).has_value(); }, 10s));
}

TEST_CASE(
    "a failover in one member: it does not vote for that slot until its guard window passed, then votes "
    "again") {
  std::vector<std::unique_ptr<redis_cluster>> cls;
  cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3, .replicas = 1}));
  cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3}));
  cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3}));
  redsync::redsync_options opts;
  opts.restart_guard = true;
  opts.restart_guard_window = 1500ms;
  redsync::Redsync rs({cls[0]->uri(), cls[1]->uri(), cls[2]->uri()}, opts);
  const std::string name = unique_name("cluster-failover");
  auto m = rs.new_mutex(name, {.expiry = 1s, .tries = 100000});
  // One lock and unlock; true when every member's vote counted.
  const auto all_vote = [&] {
    auto r = m.lock(redsync::context::timeout(20s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    bool all = true;
    for (const auto& n : r.nodes) all = all && n.status == redsync::node_status::ok;
    (void)m.unlock(redsync::context::timeout(5s));
    return all;
  };
  // Brand-new members vote once their guard window passed.
  REQUIRE(wait_until(all_vote, 30s));

  redis_cluster& cl = *cls[0];
  const std::uint16_t slot = cluster_name_slot(name);
  fail_over_to_replica(cl, cl.owner(slot));

  // The promoted master's record names the old one: member 1 is left out of
  // that slot's votes (the lock still comes from the two others) ...
  const auto left_out = [&] {
    auto r = m.lock(redsync::context::timeout(20s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    REQUIRE(r.nodes.size() == 3);
    CHECK(r.nodes[0].status != redsync::node_status::ok);
    (void)m.unlock(redsync::context::timeout(5s));
    return r.nodes[0].status == redsync::node_status::excluded &&
           r.nodes[0].message.find("not verified") != std::string::npos;
  };
  CHECK(wait_until(left_out, 20s));
  // ... until its record was repaired and the guard window has passed: then
  // it votes again (availability).
  CHECK(wait_until(all_vote, 30s));
}

TEST_SUITE_END();
