// Durable mode (mutex_options::durable_replicas; docs/cluster.md, "Durable
// mode"): WAIT behind each acquisition script, and a member's vote counted
// only when enough replicas acknowledged. Against real masters with real
// replicas (standalone, and cluster members); a replica paused with SIGSTOP
// acknowledges nothing.
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
#include <optional>
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using redsync::detail::key_slot;
using namespace redsync::test;

namespace {

// A standalone master with one replica whose link is up.
struct master_with_replica {
  redis_server master;
  redis_server replica;

  // Without the diskless sync's default 5 s delay, the replica links at once.
  master_with_replica()
      : master(redsync::test::config{.extra_args = {"--repl-diskless-sync-delay", "0"}}),
        replica(redsync::test::config{
            .extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}}) {
    redis_client m(master);
    redis_client r(replica);
    if (!wait_until(
            [&] {
              return m.info_field("replication", "connected_slaves") == "1" &&
                     r.info_field("replication", "master_link_status") == "up";
            },
            20s))
      throw std::runtime_error("replica of " + master.address() + " never linked: " + replica.log_tail());
  }
};

std::vector<std::unique_ptr<master_with_replica>> pairs(std::size_t n) {
  std::vector<std::unique_ptr<master_with_replica>> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(std::make_unique<master_with_replica>());
  return out;
}

std::vector<std::string> master_uris(const std::vector<std::unique_ptr<master_with_replica>>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps) out.push_back(p->master.uri());
  return out;
}

// Per-node timeout 2.5 s (10 s * 0.25), WAIT 1 s: generous, as a replica on
// a loaded machine may take a while to acknowledge, and Redis checks a
// WAIT's timeout only at its hz (every 100 ms by default), so a WAIT may
// answer up to that much late.
redsync::mutex_options durable(std::chrono::milliseconds wait = 1000ms) {
  return {.expiry = 10s, .timeout_factor = 0.25, .durable_replicas = 1, .durable_wait_timeout = wait};
}

// The value of `key` on a cluster replica (READONLY: a replica redirects
// reads otherwise).
std::optional<std::string> get_on_replica(const redis_server& replica, const std::string& key) {
  redis_client c(replica);
  c.command({"READONLY"});
  return c.get(key);
}

// Two masters with a replica each, linked at once (no diskless sync delay).
cluster_config with_replica() {
  return {.masters = 2, .replicas = 1, .server = {.extra_args = {"--repl-diskless-sync-delay", "0"}}};
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// A name whose slot is served by master `master` of a 2-master cluster
// (slots 0..8191 by master 0, the rest by master 1).
std::string name_on_master(const std::string& base, std::size_t master) {
  for (int i = 0;; ++i) {
    std::string name = base + ":" + std::to_string(i);
    if ((cluster_name_slot(name) >= 8192) == (master == 1)) return name;
  }
}

}  // namespace

TEST_SUITE_BEGIN("durable");

TEST_CASE(
    "durable mode: a member whose replica is paused does not vote, with the reason, and the lock is "
    "acquired by the quorum of members whose replicas acknowledged") {
  auto ps = pairs(3);
  redsync::Redsync rs(master_uris(ps), fresh_nodes());
  const std::string name = unique_name("durable-vote");
  auto m = rs.new_mutex(name, durable());
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  for (const auto& n : r.nodes) CHECK_MESSAGE(n.status == redsync::node_status::ok, n.message);
  // Acknowledged means applied by the replica: the key is there already.
  for (auto& p : ps) CHECK(redis_client(p->replica).get(name) == m.value());
  REQUIRE(m.unlock(redsync::context::timeout(10s)).ok());

  ps[2]->replica.pause();
  const auto before = std::chrono::steady_clock::now();
  auto r2 = m.try_lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(r2.ok(), r2.describe());
  // The validity counts from before the send, so the WAIT's time (the
  // attempt waits for every member, the paused one's WAIT included) is not
  // validity: until() is the attempt's start (a moment after `before`, far
  // less than the WAIT's 1 s) + expiry - drift (10 s * 0.01 + 2 ms).
  CHECK(std::chrono::steady_clock::now() - before >= 900ms);
  CHECK(m.until() < before + 10s - 102ms + 500ms);
  CHECK(r2.nodes[0].status == redsync::node_status::ok);
  CHECK(r2.nodes[1].status == redsync::node_status::ok);
  CHECK(r2.nodes[2].status == redsync::node_status::reply_error);
  CHECK_MESSAGE(r2.nodes[2].message == "durable: 0 of 1 replicas acknowledged within 1000 ms",
                r2.nodes[2].message);
  // The WAIT's time is in the node's latency, and within the per-node timeout.
  CHECK(r2.nodes[2].latency >= 900ms);
  CHECK(r2.nodes[2].latency < 2500ms);
  ps[2]->replica.resume();
  CHECK(m.unlock(redsync::context::timeout(10s)).ok());
}

TEST_CASE(
    "durable mode: a lock is refused within the bound when too few members' replicas acknowledge, and no "
    "key is left on any member") {
  auto ps = pairs(3);
  redsync::Redsync rs(master_uris(ps), fresh_nodes());
  const std::string name = unique_name("durable-refused");
  // Every node's record is verified by a first lock with every replica up.
  auto m = rs.new_mutex(name, durable());
  REQUIRE(m.lock(redsync::context::timeout(20s)).ok());
  REQUIRE(m.unlock(redsync::context::timeout(10s)).ok());

  ps[0]->replica.pause();
  ps[1]->replica.pause();
  const auto started = std::chrono::steady_clock::now();
  auto r = m.try_lock(redsync::context::timeout(10s));
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(r.error == redsync::errc::no_quorum);
  CHECK(took < 8s);  // one attempt: the per-node timeout (2.5 s) bounds it, with the undo (no hang)
  for (std::size_t i : {0u, 1u}) {
    CHECK(r.nodes[i].status == redsync::node_status::reply_error);
    CHECK_MESSAGE(starts_with(r.nodes[i].message, "durable: 0 of 1 replicas acknowledged"),
                  r.nodes[i].message);
  }
  CHECK(r.nodes[2].status == redsync::node_status::ok);
  // The failed attempt is undone on every member, the non-voting ones too.
  for (auto& p : ps) {
    redis_client c(p->master);
    CHECK(wait_until([&] { return !c.exists(name); }, 10s));
  }
  ps[0]->replica.resume();
  ps[1]->replica.resume();
  // And once the replicas acknowledge again, the lock is granted.
  auto again = m.try_lock(redsync::context::timeout(10s));
  CHECK_MESSAGE(again.ok(), again.describe());
}

TEST_CASE(
    "durable mode on cluster members: a multi-name lock waits on each slot group's master, and a member "
    "one of whose groups was not acknowledged keeps none of its groups") {
  redis_cluster a(with_replica());
  redis_cluster b(with_replica());
  master_with_replica c;
  const std::vector<std::string> set{a.uri(), b.uri(), c.master.uri()};
  redsync::Redsync rs(set, fresh_nodes());
  const std::string base = unique_name("durable-multi");
  const std::vector<std::string> names{name_on_master(base + "a", 0), name_on_master(base + "b", 1)};
  auto m = rs.new_multi_mutex(names, durable());
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  for (const auto& n : r.nodes) CHECK_MESSAGE(n.status == redsync::node_status::ok, n.message);
  // Each group's key is on the replica of its slot's master (node 2 is
  // master 0's replica, node 3 master 1's).
  for (redis_cluster* cl : {&a, &b})
    for (const auto& n : names) {
      const std::string key = cluster_lock_key(n);
      const std::size_t owner = cl->owner(key_slot(key));
      CHECK(get_on_replica((*cl)[2 + owner], key) == m.value());
    }
  REQUIRE(m.unlock(redsync::context::timeout(10s)).ok());

  // Member a's replica of master 1 (names[1]'s group) acknowledges nothing.
  a[3].pause();
  auto r2 = m.try_lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(r2.ok(), r2.describe());
  CHECK(r2.nodes[0].status == redsync::node_status::reply_error);
  CHECK_MESSAGE(r2.nodes[0].message == "durable: 0 of 1 replicas acknowledged within 1000 ms",
                r2.nodes[0].message);
  CHECK(r2.nodes[1].status == redsync::node_status::ok);
  CHECK(r2.nodes[2].status == redsync::node_status::ok);
  // All or nothing on member a: the acknowledged group was undone too.
  for (const auto& n : names) {
    const std::string key = cluster_lock_key(n);
    redis_client owner(a[a.owner(key_slot(key))]);
    CHECK(wait_until([&] { return !owner.exists(key); }, 10s));
  }
  a[3].resume();
  CHECK(m.unlock(redsync::context::timeout(10s)).ok());
}

TEST_CASE(
    "durable mode: on a node that lost the script, the WAIT read is the one behind the script sent again "
    "(EVAL, or FCALL after FUNCTION LOAD), not the one behind the refused first call") {
  for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
    CAPTURE(static_cast<int>(mode));
    auto ps = pairs(3);
    redsync::Redsync rs(master_uris(ps), fresh_nodes({.script_mode = mode}));
    auto m = rs.new_mutex(unique_name("durable-fallback"), durable());
    REQUIRE(m.lock(redsync::context::timeout(20s)).ok());
    REQUIRE(m.unlock(redsync::context::timeout(10s)).ok());
    // Member 2 loses its scripts, and its replica acknowledges everything
    // written so far, then nothing more: a WAIT behind the refused first
    // call (no write) would answer 1 at once; only the WAIT behind the
    // script that ran tells the truth.
    redis_client master(ps[2]->master);
    master.command({mode == redsync::script_mode::eval ? "SCRIPT" : "FUNCTION", "FLUSH"});
    REQUIRE(wait_until(
        [&] {
          const std::string replica = master.info_field("replication", "slave0");
          const std::string at = master.info_field("replication", "master_repl_offset");
          return replica.find(",offset=" + at + ",") != std::string::npos;
        },
        10s));
    ps[2]->replica.pause();
    auto r = m.try_lock(redsync::context::timeout(10s));
    CHECK(r.nodes[2].status == redsync::node_status::reply_error);
    CHECK_MESSAGE(r.nodes[2].message == "durable: 0 of 1 replicas acknowledged within 1000 ms",
                  r.nodes[2].message);
    ps[2]->replica.resume();
  }
}

TEST_CASE("durable mode's options are checked, and a bad value is named") {
  redis_server s;
  redsync::Redsync rs({s.uri()}, fresh_nodes());
  auto bad = [&](redsync::mutex_options o, const std::string& says) {
    CHECK_THROWS_WITH_AS(rs.new_mutex("durable-options", o), doctest::Contains(says.c_str()),
                         redsync::config_error);
  };
  bad({.durable_replicas = -1}, "mutex_options.durable_replicas = -1: must be in 0..1000");
  bad({.durable_replicas = 1001}, "mutex_options.durable_replicas = 1001: must be in 0..1000");
  bad({.durable_wait_timeout = 50ms},
      "mutex_options.durable_wait_timeout = 50 ms: set, but durable_replicas is 0");
  bad({.durable_replicas = 1, .durable_wait_timeout = -1ms},
      "mutex_options.durable_wait_timeout = -1 ms: must not be negative");
  // The default per-node timeout is 400 ms (8 s * 0.05).
  bad({.durable_replicas = 1, .durable_wait_timeout = 400ms},
      "mutex_options.durable_wait_timeout = 400 ms: must be less than the per-node command timeout (400 ms");
  bad({.expiry = 30ms, .timeout_factor = 0.05, .durable_replicas = 1},
      "mutex_options.durable_replicas = 1: the per-node command timeout (1.5 ms) leaves no room");
  CHECK_NOTHROW(rs.new_mutex("durable-options", {.durable_replicas = 1, .durable_wait_timeout = 399ms}));
  CHECK_NOTHROW(rs.new_mutex("durable-options", {.durable_replicas = 2}));
}

TEST_CASE("durable mode: a master without replicas never votes, and says so") {
  redsync::test::cluster nodes(3);
  redsync::Redsync rs(nodes.uris(), fresh_nodes());
  const std::string name = unique_name("durable-alone");
  auto m = rs.new_mutex(name, durable(20ms));
  auto r = m.try_lock(redsync::context::timeout(10s));
  CHECK(r.error == redsync::errc::no_quorum);
  for (const auto& n : r.nodes) {
    // A brand-new node may first be excluded (its record not repaired yet);
    // a node that ran the script says why it did not vote.
    if (n.status == redsync::node_status::excluded) continue;
    CHECK(n.status == redsync::node_status::reply_error);
    CHECK_MESSAGE(n.message == "durable: 0 of 1 replicas acknowledged within 20 ms", n.message);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    redis_client c(nodes[i]);
    CHECK(wait_until([&] { return !c.exists(name); }, 10s));
  }
}

TEST_SUITE_END();
