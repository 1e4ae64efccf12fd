// The cluster router against real local clusters: routing by slot across
// masters, MOVED and ASK during a live resharding, TRYAGAIN and CLUSTERDOWN
// handed up as error replies, a failover followed, and unreachable seeds.
#include <doctest/doctest.h>

#include "util/cluster_slot.hpp"

#include <chrono>
#include <string>
#include <vector>

#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "router_fixture.hpp"
#include "wait.hpp"

using namespace std::chrono_literals;
using redsync::detail::command_result;
using redsync::detail::key_slot;
using redsync::detail::slot_map;
using redsync::detail::transport_status;
using namespace redsync::test;

namespace {

bool ok(const command_result& r) {
  return r.status == transport_status::ok && !r.value.is_error();
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

TEST_CASE("commands reach the master of their key's slot on every master, from one seed") {
  redis_cluster cl;
  router_fixture f("redis+cluster://" + cl[1].address());
  std::vector<int> per_master(3, 0);
  for (int i = 0; i < 24; ++i) {
    const std::string key = "route:" + std::to_string(i);
    REQUIRE(ok(f.call({"SET", key, "v" + std::to_string(i)})));
    const std::size_t owner = cl.owner(key_slot(key));
    redis_client c(cl[owner]);
    CHECK(c.get(key) == "v" + std::to_string(i));
    ++per_master[owner];
  }
  for (int n : per_master) CHECK(n > 0);
  const slot_map m = f.map();
  CHECK(m.masters.size() == 3);
  CHECK(m.uncovered() == 0);
}

TEST_CASE("MOVED: once a slot has moved, commands follow it and the map names the new master") {
  redis_cluster cl;
  router_fixture f(cl.uri());
  const std::string key = "moved:{k}";
  const std::uint16_t slot = key_slot(key);
  REQUIRE(ok(f.call({"SET", key, "v"})));
  const std::size_t from = cl.owner(slot);
  const std::size_t to = (from + 1) % 3;
  cl.begin_migration(slot, from, to);
  cl.migrate_keys(slot, from, to);
  cl.finish_migration(slot, to);
  const command_result r = f.call({"GET", key});
  REQUIRE(ok(r));
  CHECK(r.value.str == "v");
  const slot_map m = f.map();
  REQUIRE(m.owner[slot] != slot_map::no_master);
  CHECK(m.masters[static_cast<std::size_t>(m.owner[slot])].port == cl[to].port());
}

TEST_CASE(
    "ASK: during a migration a key that already left is served by the importing master, the map unchanged") {
  redis_cluster cl;
  router_fixture f(cl.uri());
  const std::string gone = "ask:{k}:gone";
  const std::string stays = "ask:{k}:stays";
  const std::uint16_t slot = key_slot(gone);
  REQUIRE(ok(f.call({"SET", gone, "g"})));
  REQUIRE(ok(f.call({"SET", stays, "s"})));
  const std::size_t from = cl.owner(slot);
  const std::size_t to = (from + 2) % 3;
  cl.begin_migration(slot, from, to);
  cl.migrate_keys(slot, from, to, {gone});
  const command_result r = f.call({"GET", gone});
  REQUIRE(ok(r));
  CHECK(r.value.str == "g");
  CHECK(f.call({"GET", stays}).value.str == "s");
  // A new key of a migrating slot goes to the importing master.
  REQUIRE(ok(f.call({"SET", "ask:{k}:new", "n"})));
  redis_client dst(cl[to]);
  REQUIRE(dst.command({"ASKING"}).str == "OK");  // the slot is not its own yet
  CHECK(dst.command({"GET", "ask:{k}:new"}).str == "n");
  const slot_map m = f.map();
  CHECK(m.masters[static_cast<std::size_t>(m.owner[slot])].port == cl[from].port());

  SUBCASE("TRYAGAIN: a multi-key command over keys on both sides is handed up as the error it is") {
    const command_result t = f.call({"MGET", gone, stays});
    REQUIRE(t.status == transport_status::ok);
    CHECK(t.value.is_error());
    CHECK(t.value.str.starts_with("TRYAGAIN"));
  }
}

TEST_CASE(
    "CLUSTERDOWN: with a master dead and no replica, a command is an error reply that says so, in time") {
  redis_cluster cl;
  router_fixture f(cl.uri());
  const std::string key = "down:{k}";
  const std::uint16_t slot = key_slot(key);
  REQUIRE(ok(f.call({"SET", key, "v"})));
  const std::size_t owner = cl.owner(slot);
  cl[owner].kill();
  const std::size_t other = (owner + 1) % 3;
  redis_client c(cl[other]);
  REQUIRE(wait_until(
      [&] {
        return c.command({"CLUSTER", "INFO"}).str.find("cluster_state:fail") != std::string::npos;
      },
      20s));
  // A key on a live master: the cluster as a whole refuses (full coverage
  // is required by default).
  std::string live_key;
  for (int i = 0; live_key.empty(); ++i) {
    const std::string k = "down:" + std::to_string(i);
    if (cl.owner(key_slot(k), other) == other) live_key = k;
  }
  const auto start = std::chrono::steady_clock::now();
  const command_result r = f.call({"GET", live_key}, 1000ms);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
  REQUIRE(r.status == transport_status::ok);
  CHECK(r.value.is_error());
  CHECK(r.value.str.starts_with("CLUSTERDOWN"));
  // A key of the dead master's slot: unreachable or a CLUSTERDOWN, never a value.
  const command_result d = f.call({"GET", key}, 1000ms);
  CHECK_FALSE(ok(d));
}

TEST_CASE("a failover: commands reach the promoted replica") {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  router_fixture f(cl.uri());
  const std::string key = "failover:{k}";
  const std::uint16_t slot = key_slot(key);
  REQUIRE(ok(f.call({"SET", key, "v"})));
  const std::size_t master = cl.owner(slot);
  const std::size_t replica = master + 3;
  redis_client m(cl[master]);
  REQUIRE(m.command({"WAIT", "1", "5000"}).integer == 1);  // the replica has the key
  redis_client r(cl[replica]);
  REQUIRE(r.command({"CLUSTER", "FAILOVER"}).str == "OK");
  REQUIRE(wait_until([&] { return r.info_field("replication", "role") == "master"; }, 20s));
  CHECK(wait_until([&] { return ok(f.call({"SET", key, "w"}, 500ms)); }, 20s));
  CHECK(r.get(key) == "w");
}

TEST_CASE(
    "a result names the master that ran it, whose handshake INFO the router hands up (also after a "
    "failover)") {
  // node_trust identifies the master of a slot by the connection that ran
  // the call: right after a failover the map may still name the old master.
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  router_fixture f(cl.uri());
  const std::string key = "served:{k}";
  const std::uint16_t slot = key_slot(key);
  const command_result first = f.call({"SET", key, "v"});
  REQUIRE(ok(first));
  const std::size_t master = cl.owner(slot);
  CHECK(first.served_by == "127.0.0.1:" + std::to_string(cl[master].port()));
  redis_client m(cl[master]);
  CHECK(f.run_ids()[first.served_by] == m.info_field("server", "run_id"));
  REQUIRE(m.command({"WAIT", "1", "5000"}).integer == 1);
  const std::size_t replica = master + 3;
  redis_client r(cl[replica]);
  REQUIRE(r.command({"CLUSTER", "FAILOVER"}).str == "OK");
  REQUIRE(wait_until([&] { return r.info_field("replication", "role") == "master"; }, 20s));
  command_result after;
  CHECK(wait_until(
      [&] {
        after = f.call({"SET", key, "w"}, 500ms);
        return ok(after);
      },
      20s));
  CHECK(after.served_by == "127.0.0.1:" + std::to_string(cl[replica].port()));
  CHECK(f.run_ids()[after.served_by] == r.info_field("server", "run_id"));
  CHECK(f.run_ids()[after.served_by] != f.run_ids()[first.served_by]);
}

TEST_CASE("a master killed (kill -9): commands reach its replica once the cluster promoted it") {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  router_fixture f(cl.uri());
  const std::string key = "killed:{k}";
  const std::uint16_t slot = key_slot(key);
  REQUIRE(ok(f.call({"SET", key, "v"})));
  const std::size_t master = cl.owner(slot);
  // The replica has the key (read there: WAIT alone was seen to return 1
  // right after the replica's first sync without the write having reached
  // it).
  redis_client replica(cl[master + 3]);
  REQUIRE(replica.command({"READONLY"}).str == "OK");
  REQUIRE(wait_until([&] { return replica.command({"GET", key}).str == "v"; }, 10s));
  cl[master].kill();
  // Until the promotion, a command fails (unreachable, or the cluster is
  // down), each within its timeout; then it reaches the new master.
  command_result r;
  CHECK(wait_until(
      [&] {
        r = f.call({"GET", key}, 500ms);
        return ok(r);
      },
      30s));
  CHECK(r.value.str == "v");
  CHECK(f.map().masters.at(static_cast<std::size_t>(f.map().owner[slot])).port == cl[master + 3].port());
}

TEST_CASE("a command with no time left times out, never inside send()") {
  redis_cluster cl(cluster_config{.masters = 1});
  router_fixture f(cl.uri());
  bool inside_send = false;
  const command_result r = f.call_checked({"GET", "x"}, 0ms, inside_send);
  CHECK_FALSE(inside_send);
  CHECK(r.status == transport_status::timeout);
  // 1 ms: the map read and the command may well make it on loopback; either
  // way the callback comes later.
  inside_send = true;
  (void)f.call_checked({"GET", "x"}, 1ms, inside_send);
  CHECK_FALSE(inside_send);
}

TEST_CASE("no seed answers: commands fail as unreachable, naming every seed tried") {
  redis_cluster cl(cluster_config{.masters = 1});
  const std::string uri = cl.uri();
  cl[0].kill();
  router_fixture f(uri);
  const command_result r = f.call({"GET", "x"}, 1000ms);
  CHECK(r.status == transport_status::unreachable);
  CHECK(r.error.find("cluster: no slot map") != std::string::npos);
  CHECK(r.error.find(cl[0].address()) != std::string::npos);
}

TEST_SUITE_END();
