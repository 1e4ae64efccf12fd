// The lock scripts on a cluster member with the cluster key layout
// (cluster_keys.hpp), sent through the cluster router: every key of a call
// is in one slot, so the scripts run as they do on a standalone node, and
// the per-slot node record counts the fencing tokens of its slot.
#include <doctest/doctest.h>

#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/trust/node_identity.hpp"
#include "util/cluster_slot.hpp"

#include <string>
#include <string_view>
#include <vector>

#include "../transport/router_fixture.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "wait.hpp"

using namespace redsync::detail;
using namespace redsync::test;

namespace {

// The acquire script for `names` (all in one slot) with mode "0" (do not
// wait), as EVAL.
wire_command acquire(const std::vector<std::string>& names, const std::string& value) {
  const std::uint16_t slot = cluster_name_slot(names.front());
  std::vector<std::string> keys;
  for (const auto& n : names) keys.push_back(cluster_lock_key(n));
  keys.push_back(cluster_record_key(slot));
  for (const auto& n : names) keys.push_back(line_key(cluster_lock_key(n)));
  for (const auto& n : names) keys.push_back(lease_key(cluster_lock_key(n)));
  std::vector<std::string> args = {value, "10000", "1", "5000", "0", "1"};
  for (const auto& n : names) args.push_back(release_channel(cluster_lock_key(n)));
  const std::vector<std::string_view> k(keys.begin(), keys.end());
  const std::vector<std::string_view> a(args.begin(), args.end());
  return to_eval(make_script_call(acquire_script(), k, a));
}

wire_command release(const std::vector<std::string>& names, const std::string& value) {
  std::vector<std::string> keys;
  for (const auto& n : names) keys.push_back(cluster_lock_key(n));
  for (const auto& n : names) keys.push_back(line_key(cluster_lock_key(n)));
  for (const auto& n : names) keys.push_back(lease_key(cluster_lock_key(n)));
  std::vector<std::string> args = {value, "0"};
  for (const auto& n : names) args.push_back(release_channel(cluster_lock_key(n)));
  const std::vector<std::string_view> k(keys.begin(), keys.end());
  const std::vector<std::string_view> a(args.begin(), args.end());
  return to_eval(make_script_call(release_script(), k, a));
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

TEST_CASE(
    "on a cluster member the lock scripts run in the name's slot, counting tokens in the slot's record") {
  redis_cluster cl;
  router_fixture f(cl.uri());
  const std::string name = "cluster-scripts:orders";
  const std::uint16_t slot = cluster_name_slot(name);
  redis_client owner(cl[cl.owner(slot)]);

  const auto won = f.send(slot, acquire({name}, "v1"));
  REQUIRE(won.value.type == reply::kind::array);
  CHECK(won.value.elements.at(0).integer == 1);  // the slot record's first token
  CHECK(owner.get(cluster_lock_key(name)) == "v1");
  CHECK(owner.command({"HGET", cluster_record_key(slot), "fence"}).str == "1");

  const auto busy = f.send(slot, acquire({name}, "v2"));
  CHECK(busy.value.type == reply::kind::nil);

  CHECK(f.send(slot, release({name}, "v1")).value.integer == 1);
  CHECK_FALSE(owner.exists(cluster_lock_key(name)));
  const auto again = f.send(slot, acquire({name}, "v2"));
  REQUIRE(again.value.type == reply::kind::array);
  CHECK(again.value.elements.at(0).integer == 2);
}

TEST_CASE(
    "a multi-name lock takes names of one slot in one call, and names of two slots need one call each") {
  redis_cluster cl;
  router_fixture f(cl.uri());
  const std::vector<std::string> same = {"cluster-scripts:{t}:a", "cluster-scripts:{t}:b"};
  const auto won = f.send(cluster_name_slot(same[0]), acquire(same, "v"));
  REQUIRE(won.value.type == reply::kind::array);
  CHECK(f.send(cluster_name_slot(same[0]), release(same, "v")).value.integer == 1);

  std::vector<std::string> spread = {"cluster-scripts:x", "cluster-scripts:y"};
  REQUIRE(cluster_name_slot(spread[0]) != cluster_name_slot(spread[1]));
  const auto refused = f.send(cluster_name_slot(spread[0]), acquire(spread, "v"));
  CHECK(refused.value.is_error());
  CHECK(refused.value.str.starts_with("CROSSSLOT"));
  const auto groups = group_by_slot(spread);
  REQUIRE(groups.size() == 2);
  for (const auto& g : groups) {
    const auto r = f.send(g.slot, acquire(g.names, "v"));
    REQUIRE(r.value.type == reply::kind::array);
    CHECK(r.value.elements.at(0).integer == 1);  // each slot counts on its own
  }
}

TEST_CASE(
    "a lock held across a resharding: TRYAGAIN (a non-vote) while its slot migrates, then released on the "
    "new master") {
  redis_cluster cl;
  router_fixture f(cl.uri());
  const std::string name = "cluster-scripts:moving";
  const std::uint16_t slot = cluster_name_slot(name);
  REQUIRE(f.send(slot, acquire({name}, "v1")).value.type == reply::kind::array);
  const std::size_t from = cl.owner(slot);
  const std::size_t to = (from + 1) % 3;
  cl.begin_migration(slot, from, to);
  cl.migrate_keys(slot, from, to);
  // The source sends the call on (ASK: its keys left), and the importing
  // master refuses a multi-key call while some of its keys do not exist
  // there (the line and the leases never do): every lock script is
  // TRYAGAIN until the migration ends. The key stays until then.
  const auto during = f.send(slot, release({name}, "v1"));
  REQUIRE(during.status == transport_status::ok);
  CHECK(during.value.is_error());
  CHECK(during.value.str.starts_with("TRYAGAIN"));
  cl.finish_migration(slot, to);
  // The record moved with the slot: the next token continues its count.
  redis_client dst(cl[to]);
  CHECK(dst.get(cluster_lock_key(name)) == "v1");
  CHECK(dst.command({"HGET", cluster_record_key(slot), "fence"}).str == "1");
  CHECK(f.send(slot, release({name}, "v1")).value.integer == 1);  // MOVED, followed
  CHECK_FALSE(dst.exists(cluster_lock_key(name)));
  const auto next = f.send(slot, acquire({name}, "v2"));
  REQUIRE(next.value.type == reply::kind::array);
  CHECK(next.value.elements.at(0).integer == 2);
}

TEST_CASE("a failover is a restart for the slot's record: it names the old master, not the promoted one") {
  using namespace std::chrono_literals;
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  router_fixture f(cl.uri());
  const std::string name = "cluster-scripts:failover";
  const std::uint16_t slot = cluster_name_slot(name);
  const std::string record = cluster_record_key(slot);
  const auto identity_of_master = [&] {
    // A keyed command first, so the router follows a MOVED to the slot's
    // master; INFO has no key and goes where the map says.
    f.send(slot, encode_command({"EXISTS", record}));
    return identify_server(f.send(slot, encode_command({"INFO"})).value, redsync::script_mode::eval,
                           listed_as::cluster_master);
  };
  const auto read_record = [&](const std::string& identity) {
    const std::vector<std::string_view> keys = {record};
    const std::vector<std::string_view> args = {"random", identity};
    return f.send(slot, to_eval(make_script_call(record_read_script(), keys, args))).value;
  };

  const server_identity before = identity_of_master();
  REQUIRE(before.problem.empty());
  // Steps (1) and (3) of the repair (node_trust.hpp): mark, then stamp.
  const reply marked = read_record(before.identity);
  REQUIRE(marked.elements.size() == 6);
  const std::string mark = marked.elements[4].str;
  const std::vector<std::string_view> keys = {record};
  const std::vector<std::string_view> args = {"0", before.identity, mark, marked.elements[3].str, "10000"};
  REQUIRE(f.send(slot, to_eval(make_script_call(record_stamp_script(), keys, args))).value.integer == 1);
  const reply verified = read_record(before.identity);
  CHECK(verified.elements[1].str == before.identity);

  const std::size_t master = cl.owner(slot);
  redis_client replica(cl[master + 3]);
  REQUIRE(replica.command({"READONLY"}).str == "OK");
  REQUIRE(redsync::test::wait_until(
      [&] {
        return replica.command({"HGET", record, "run"}).str == before.identity;
      },
      10s));
  REQUIRE(replica.command({"CLUSTER", "FAILOVER"}).str == "OK");
  REQUIRE(
      redsync::test::wait_until([&] { return replica.info_field("replication", "role") == "master"; }, 20s));
  // The old master serves the slot until it hears of the promotion.
  redis_client old(cl[master]);
  REQUIRE(redsync::test::wait_until([&] { return old.info_field("replication", "role") == "slave"; }, 20s));

  // Until every master's map has the promotion, a map read may still name
  // the old master (a replica now: a problem, never a vote).
  server_identity after;
  REQUIRE(redsync::test::wait_until(
      [&] {
        after = identity_of_master();
        return after.problem.empty();
      },
      10s));
  CHECK(after.identity != before.identity);
  CHECK(after.run_id != before.run_id);
  // The record came along by replication, still stamped for the old master:
  // unverified under the new one, which gets a mark of its own (step 1).
  const reply now = read_record(after.identity);
  CHECK(now.elements[0].str == verified.elements[0].str);  // the counter, replicated
  CHECK(now.elements[1].str == before.identity);           // not the promoted master's
  CHECK(now.elements[4].str.ends_with(after.identity));    // a new repair begins
  // The old master, now a replica, can never vote.
  reply info;
  info.type = reply::kind::string;
  info.str = old.command({"INFO"}).str;
  const std::string problem =
      identify_server(info, redsync::script_mode::eval, listed_as::cluster_master).problem;
  CHECK(problem.find("replica") != std::string::npos);
}

TEST_CASE("a script may SPUBLISH a wake-up on its name's channel, never on a channel of another slot") {
  // Why a cluster member's scripts publish with SPUBLISH on
  // release_channel(cluster_lock_key(name)): the channel is in the slot of
  // the keys the script touches, so the publish is local to that shard.
  redis_cluster cl;
  router_fixture f(cl.uri());
  const std::string key = cluster_lock_key("cluster-scripts:wake");
  const std::uint16_t slot = key_slot(key);
  const std::string script =
      "redis.call('SET', KEYS[1], 'v'); return redis.call('SPUBLISH', ARGV[1], 'head')";
  const auto publish = [&](const std::string& channel) {
    return f.send(slot, encode_command({"EVAL", script, "1", key, channel}));
  };
  const auto local = publish(release_channel(key));
  REQUIRE(local.status == transport_status::ok);
  CHECK(local.value.type == reply::kind::integer);  // the number of sharded subscribers
  // A waiter's own channel (the release channel, ':', SHA1 of its value) is
  // in the same slot: the hash tag comes first.
  const auto own = publish(waiter_channel(release_channel(key), std::string(40, 'a')));
  REQUIRE(own.status == transport_status::ok);
  CHECK(own.value.type == reply::kind::integer);
  // A channel served by another master (another slot of the same master
  // is not refused: the server checks that it serves the channel's slot).
  std::string elsewhere;
  for (int i = 0; elsewhere.empty(); ++i) {
    const std::string channel = release_channel(cluster_lock_key("cluster-scripts:" + std::to_string(i)));
    if (cl.owner(key_slot(channel)) != cl.owner(slot)) elsewhere = channel;
  }
  const auto other = publish(elsewhere);
  REQUIRE(other.status == transport_status::ok);
  CHECK(other.value.is_error());
}

TEST_SUITE_END();
