// `redsync ping` and `redsync status` with cluster members
// (redis+cluster://seed,...): ping reports each member as a whole (up when
// every slot has a master that answers) with its masters, and counts
// members for the quorum; status reads a name on the master that serves its
// slot, in the cluster key layout, following a redirection (for a lock and
// for a semaphore's permits); a cluster node listed as redis:// and one
// cluster listed twice are node-list errors.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "cli_helpers.hpp"
#include "cluster_members.hpp"
#include "redlock/scripts/cluster_keys.hpp"

using namespace redsync::test;

namespace {

std::size_t count_of(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The slots of master k of a redis_cluster with `masters` masters (the
// fixture's equal ranges), as ping prints them and as its JSON gives them.
std::string range_text(std::size_t k, std::size_t masters) {
  return std::to_string(k * 16384 / masters) + "-" + std::to_string((k + 1) * 16384 / masters - 1);
}
std::string range_json(std::size_t k, std::size_t masters) {
  return "[" + std::to_string(k * 16384 / masters) + "," + std::to_string((k + 1) * 16384 / masters - 1) +
         "]";
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("cli: ping over cluster members lists every master and exits 0 when every slot is served") {
    three_clusters members;
    auto& [c1, c2, c3] = members;
    temp_dir dir;
    const std::string list = members.nodes_arg();

    auto o = run_cli({"ping", list}, dir.path(), 30s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(contains(o.out, "3/3 members up"));
    for (const redis_cluster* c : {&c1, &c2, &c3}) {
      CHECK(contains(o.out, c->uri() + ": up, 3 masters serve every slot\n"));
      for (std::size_t k = 0; k < 3; ++k) CHECK(contains(o.out, "master " + (*c)[k].address() + ": up, "));
    }

    auto j = run_cli({"ping", "--json", list}, dir.path(), 30s);
    INFO(show(j));
    CHECK(j.status == 0);
    CHECK(one_json_object(j.out));
    CHECK(count_of(j.out, R"("cluster":true,"unserved_slots":[])") == 3);
    CHECK(contains(j.out, R"("up":3,)"));
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(contains(j.out, R"({"address":")" + c2[k].address() + R"(","up":true,)"));
      CHECK(contains(j.out, R"("slots":[)" + range_json(k, 3) + "]}"));
    }
  }

  TEST_CASE("cli: ping reports a cluster member down, naming the slots without a master, and exits 1") {
    three_clusters members;
    auto& [c1, c2, c3] = members;
    temp_dir dir;
    const std::string list = members.nodes_arg();
    // The master of the tested name's slot, without a replica to take over.
    const std::size_t owner = c2.owner(redsync::detail::cluster_name_slot("cli-cluster-down"));
    const std::string gone = c2[owner].address();
    c2[owner].kill();

    auto o = run_cli({"ping", list}, dir.path(), 30s);
    INFO(show(o));
    CHECK(o.status == 1);
    CHECK(contains(o.out, "2/3 members up"));
    CHECK(
        contains(o.out, c2.uri() + ": down (slots " + range_text(owner, 3) + " have no master that answers"));
    CHECK(contains(o.out, c1.uri() + ": up, "));
    CHECK(contains(o.out, c3.uri() + ": up, "));
    // Until the cluster marks it failed, the map still names it; after, the
    // map leaves its slots without a master.
    CHECK((contains(o.out, "master " + gone + ": down (") || !contains(o.out, "master " + gone)));

    auto j = run_cli({"ping", "--json", list}, dir.path(), 30s);
    INFO(show(j));
    CHECK(j.status == 1);
    CHECK(one_json_object(j.out));
    CHECK(contains(j.out, R"("unserved_slots":[)" + range_json(owner, 3) + "]"));
    CHECK(contains(j.out, R"("up":2,)"));

    // Two members down of three: fewer than a quorum.
    c3[0].kill();
    auto worse = run_cli({"ping", list}, dir.path(), 30s);
    INFO(show(worse));
    CHECK(worse.status == unavailable_status);
    CHECK(contains(worse.out, "1/3 members up"));
  }

  TEST_CASE("cli: status shows the holder of a lock taken over cluster members, on every member") {
    three_clusters members;
    auto& [c1, c2, c3] = members;
    temp_dir dir;
    const std::string list = members.nodes_arg();
    const std::string name = "cli-cluster-held";
    const std::string slot = std::to_string(redsync::detail::cluster_name_slot(name));

    // status runs while `redsync lock` holds the name.
    auto o =
        run_cli({"lock", list, name, "-c", "'" + cli_path() + "' status '" + list + "' " + name + " > f"},
                dir.path(), 60s);
    INFO(show(o));
    REQUIRE(o.status == 0);
    const std::string held = read_file(dir.file("f")).value_or("");
    INFO(held);
    for (const redis_cluster* c : {&c1, &c2, &c3}) {
      const std::string master = (*c)[c->owner(redsync::detail::cluster_name_slot(name))].address();
      CHECK(contains(held, c->uri() + " (slot " + slot + " on " + master + "): held, pttl "));
      // Each member's shards, under its line: every master with its slots,
      // and which one serves the name.
      const std::size_t owner = c->owner(redsync::detail::cluster_name_slot(name));
      CHECK(contains(
          held, "  shard " + master + ": slots " + range_text(owner, 3) + ", serves slot " + slot + "\n"));
      for (std::size_t k = 0; k < 3; ++k)
        CHECK(contains(held, "  shard " + (*c)[k].address() + ": slots " + range_text(k, 3)));
    }
    CHECK(contains(held, "pid "));  // the holder, decoded from the value redsync lock made
    CHECK(contains(held, " on 3/3 nodes\n"));
    // The command's REDSYNC_LOCK_VALUE makes the value ours.
    CHECK(contains(held, "lock \"" + name + "\": held on 3/3 nodes, ours on 3/3; 3/3 nodes answered"));
    // Each member's counter for the slot was incremented by the lock.
    CHECK(contains(held, "fencing counters: "));
    CHECK_FALSE(contains(held, " none"));

    auto after = run_cli({"status", "--json", list, name}, dir.path(), 30s);
    INFO(show(after));
    CHECK(after.status == 0);
    CHECK(one_json_object(after.out));
    CHECK(contains(after.out, R"("held":0,)"));
    CHECK(contains(after.out, R"("answered":3,)"));
  }

  TEST_CASE("cli: status follows a cluster member's slot while it migrates, and after") {
    redis_cluster c(cluster_config{.masters = 3});
    temp_dir dir;
    const std::string name = "cli-cluster-moving";
    const std::uint16_t slot = redsync::detail::cluster_name_slot(name);
    const std::size_t from = c.owner(slot);
    const std::size_t to = (from + 1) % 3;
    {
      redis_client client(c[from]);
      REQUIRE(
          client.command({"SET", redsync::detail::cluster_lock_key(name), "someone", "PX", "60000"}).str ==
          "OK");
    }
    const std::string held_on_to =
        c.uri() + " (slot " + std::to_string(slot) + " on " + c[to].address() + "): held, pttl ";

    // Keys moved, slot still the source's in every map: the source answers
    // ASK, and status asks the target.
    c.begin_migration(slot, from, to);
    c.migrate_keys(slot, from, to);
    auto mid = run_cli({"status", "--nodes=" + c.uri(), name}, dir.path(), 30s);
    INFO(show(mid));
    CHECK(mid.status == 0);
    CHECK(contains(mid.out, held_on_to));
    CHECK(contains(mid.out, "value \"someone\""));

    c.finish_migration(slot, to);
    auto after = run_cli({"status", "--nodes=" + c.uri(), name}, dir.path(), 30s);
    INFO(show(after));
    CHECK(after.status == 0);
    CHECK(contains(after.out, held_on_to));
  }

  // Issue 32 §5: a cluster node given as redis:// answered CROSSSLOT to
  // every lock, and nothing said why or what to list instead.
  TEST_CASE(
      "cli: a Redis Cluster node listed as redis:// never votes: lock and ping name it and redis+cluster://, "
      "and ping fails on it and on one cluster listed twice") {
    redis_cluster c(cluster_config{.masters = 3});
    cluster nodes(2);
    temp_dir dir;
    const std::string name = "cli-cluster-as-standalone";
    const std::string node = c[1].address();
    const std::string list = "--nodes=" + nodes[0].uri() + ",redis://" + node + "," + nodes[1].uri();
    const std::string why = "node 2 (redis://" + node + ") is a Redis Cluster node (cluster_enabled:1): ";
    const std::string advice = "list it as redis+cluster://" + node + " ";
    // Verified records on the standalone nodes: they vote at once (a fresh
    // set's repair waits for the cluster node's record, which it never reads).
    prime_records(nodes.uris());

    // The other two are a quorum of 3: granted, with a warning (no -v).
    auto lock = run_cli({"lock", "--wait", "0", list, name, "--", "true"}, dir.path(), 20s);
    INFO(show(lock));
    CHECK(lock.status == 0);
    CHECK(
        contains(lock.err, "acquired lock \"" + name + "\", but 1/3 nodes never vote: " + node + " (" + why));
    CHECK(contains(lock.err, advice));

    auto ping = run_cli({"ping", list}, dir.path(), 20s);
    INFO(show(ping));
    CHECK(ping.status == usage_status);
    CHECK(contains(ping.out, node + ": up, "));
    CHECK(contains(ping.out, "; never votes: " + why));
    CHECK(contains(ping.out, advice));
    CHECK(contains(ping.out, "3/3 nodes up, "));
    CHECK(contains(ping.out, "the node list needs fixing: 1 of its 3 nodes never votes"));

    // One cluster under two members' seeds: the second never votes.
    const std::string first = "redis+cluster://" + c[0].address();
    const std::string second = "redis+cluster://" + c[2].address();
    auto twice = run_cli({"ping", "--nodes=" + first + "," + nodes[0].uri() + "," + second}, dir.path(), 20s);
    INFO(show(twice));
    CHECK(twice.status == usage_status);
    CHECK(contains(twice.out, first + ": up, 3 masters serve every slot\n"));
    CHECK(contains(twice.out, second + ": up, 3 masters serve every slot; never votes: node 3 (" + second +
                                  ") is the same cluster as node 1 (" + first + ") (master id "));
    CHECK(contains(twice.out, "the node list needs fixing: 1 of its 3 nodes never votes"));
    auto twice_json = run_cli({"ping", "--json", "--nodes=" + first + "," + nodes[0].uri() + "," + second},
                              dir.path(), 20s);
    INFO(show(twice_json));
    CHECK(twice_json.status == usage_status);
    CHECK(one_json_object(twice_json.out));
    CHECK(contains(twice_json.out, R"("vote":"never","vote_reason":"node 3 ()" + second));
    // (Seeds of three different clusters are no such error: the first test.)

    // Without the third node, no quorum: the reason names the cluster node.
    nodes[1].kill();
    auto failed = run_cli({"lock", "--wait", "0", list, name, "--", "true"}, dir.path(), 20s);
    INFO(show(failed));
    CHECK(failed.status == unavailable_status);
    CHECK(contains(failed.err, "1/3 nodes never vote: " + node + " (" + why));
    CHECK(contains(failed.err, advice));
  }

  // Issue 32 §7: status said "held on 0/3 nodes" while permits were held on
  // cluster members, and status -n refused them.
  TEST_CASE("cli: status and status -n show a semaphore's permits held over cluster members") {
    // A mixed set: both key layouts at once.
    redis_cluster c(cluster_config{.masters = 3});
    cluster standalone(2);
    temp_dir dir;
    const std::string name = "cli-cluster-sem";
    const std::uint16_t slot = redsync::detail::cluster_name_slot(name);
    const std::string list = "--nodes=" + standalone[0].uri() + "," + c.uri() + "," + standalone[1].uri();

    // status runs while `redsync lock -n 2` holds a permit.
    auto o = run_cli({"lock", "-n", "2", list, name, "-c",
                      "'" + cli_path() + "' status '" + list + "' " + name + " > f; '" + cli_path() +
                          "' status -n 2 --json '" + list + "' " + name + " > j"},
                     dir.path(), 60s);
    INFO(show(o));
    REQUIRE(o.status == 0);
    const std::string text = read_file(dir.file("f")).value_or("");
    const std::string json = read_file(dir.file("j")).value_or("");
    INFO(text);
    INFO(json);
    const std::string master = c[c.owner(slot)].address();
    CHECK(
        contains(text, c.uri() + " (slot " + std::to_string(slot) + " on " + master + "): k 2, 1 permit: "));
    CHECK(contains(text, "  shard " + master + ": slots "));
    CHECK(contains(text, standalone[0].address() + ": k 2, 1 permit: "));
    CHECK(contains(text, standalone[1].address() + ": k 2, 1 permit: "));
    CHECK(contains(text, ") on 3/3 nodes\n"));
    CHECK(contains(text, "semaphore \"" + name + "\": 2 permits, 1 held; 3/3 nodes answered, quorum "));
    CHECK(one_json_object(json));
    CHECK(contains(json, R"("semaphore":true,"permits":2,)"));
    CHECK(contains(json, R"(,"nodes":3}])"));

    auto after = run_cli({"status", "-n", "2", list, name}, dir.path(), 30s);
    INFO(show(after));
    CHECK(after.status == 0);
    CHECK(contains(after.out, c.uri() + " (slot " + std::to_string(slot) + " on "));
    CHECK(contains(after.out, "no permit held"));
    CHECK(contains(after.out, "2 permits, 0 held; 3/3 nodes answered"));
  }
}
