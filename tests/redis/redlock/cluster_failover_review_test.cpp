// A review of the failover check (durable_wait.hpp: on a cluster member a
// yes counts only when WAIT r, r = the shard's replicas in the member's
// map, answered >= r), against real local clusters. A test marked may_fail
// pins a problem that the check does not solve (with the schedule that
// shows it); the others pin a guarantee the review confirmed.
#include "cluster_votes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_name_slot;
using namespace redsync::test;

namespace failover_review {

// Every running, unpaused node of `cl` says `owner` serves `slot`.
inline bool owned_by(redis_cluster& cl, std::uint16_t slot, std::size_t owner) {
  for (std::size_t k = 0; k < cl.size(); ++k) {
    if (!cl[k].running() || cl[k].paused()) continue;
    try {
      if (cl.owner(slot, k) != owner) return false;
    } catch (const std::runtime_error&) {
      return false;
    }
  }
  return true;
}

}  // namespace failover_review

TEST_SUITE_BEGIN("cluster");

// HOLE (two holders). The failover check proves that the server which ran
// the script still had its replicas, not that it still served the slot. A
// slot can be taken from a master without its replicas leaving it: an
// operator rescuing the slot of a silent master assigns it to another
// master (CLUSTER SETSLOT s NODE x, then CLUSTER BUMPEPOCH so the claim
// wins), the way `redis-cli --cluster fix` closes a slot. Schedule, on
// members 1 and 2 (2 masters, 1 replica each; member 3 standalone): the
// master M of N's slot is paused, its slot goes to the other master X, and
// B starts trying N: X has no record of the slot, so its guard window
// starts then. A (map still naming M) sends its lock; 0.3 s later M resumes
// and runs A's script before it hears of X's claim. M's replica still
// replicates from M (M keeps its other slots), so WAIT 1 answers 1 and M's
// yes counts: A holds N from then, for a whole expiry, while X's window
// started earlier; B gets N on X1, X2 when that window ends, inside A's
// validity. A fix needs the new owner's window to start no earlier than the
// last grant the old owner could make (e.g. restart it when a MOVED or the
// map shows the old owner has learned), or an ownership proof in the script.
TEST_CASE("a slot taken from a paused master by SETSLOT NODE: the old master's stale yes does not count" *
          doctest::may_fail() * doctest::timeout(60)) {
  std::vector<std::unique_ptr<redis_cluster>> members;
  for (int k = 0; k < 2; ++k)
    members.push_back(std::make_unique<redis_cluster>(
        cluster_config{.masters = 3,
                       .replicas = 1,
                       .server = {.extra_args = {"--cluster-require-full-coverage", "no",
                                                 "--cluster-replica-no-failover", "yes"}}}));
  redsync::test::cluster standalone(1);
  const std::vector<std::string> uris{members[0]->uri(), members[1]->uri(), standalone[0].uri()};
  const std::string name = unique_name("review-setslot");
  const std::uint16_t slot = cluster_name_slot(name);
  const redsync::mutex_options opts{.expiry = 4s, .tries = 1, .timeout_factor = 0.25};
  redsync::Redsync a(uris, redsync::test::short_guard());
  auto ma = a.new_mutex(name, opts);
  REQUIRE(redsync::test::all_vote(ma));
  // Someone else's key on member 3 while B looks (below), so that B's look
  // leaves its counter where M's is: A's grant then needs no write-back of
  // its token, which would go to X and fail.
  redis_client third(standalone[0]);
  REQUIRE(third.command({"SET", name, "someone-else"}).str == "OK");

  std::vector<std::size_t> old_owner, new_owner;
  for (auto& cl : members) {
    old_owner.push_back(cl->owner(slot));
    new_owner.push_back((old_owner.back() + 1) % 3);
    (*cl)[old_owner.back()].pause();
  }
  std::this_thread::sleep_for(1500ms);  // the bus links to the silent masters drop
  for (std::size_t k = 0; k < 2; ++k) {
    redis_client x((*members[k])[new_owner[k]]);
    REQUIRE(
        x.command({"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", members[k]->id(new_owner[k])}).str ==
        "OK");
    (void)x.command({"CLUSTER", "BUMPEPOCH"});
  }
  for (std::size_t k = 0; k < 2; ++k)
    REQUIRE(wait_until([&] { return failover_review::owned_by(*members[k], slot, new_owner[k]); }, 20s));

  // B, a client that reads the maps now, looks once: X has no record of
  // the slot, so its guard window starts.
  redsync::Redsync b(uris, redsync::test::short_guard());
  auto mb = b.new_mutex(name, opts);
  auto first_b = mb.try_lock(redsync::context::timeout(10s));
  MESSAGE("B's first look: ", first_b.describe());
  REQUIRE_FALSE(first_b.ok());
  third.command({"DEL", name});
  std::this_thread::sleep_for(1000ms);
  auto ra = std::async(std::launch::async, [&] { return ma.try_lock(redsync::context::timeout(10s)); });
  std::this_thread::sleep_for(300ms);
  for (std::size_t k = 0; k < 2; ++k) (*members[k])[old_owner[k]].resume();
  auto got_a = ra.get();
  MESSAGE("A: ", got_a.describe());
  // B waits for the name, retrying every 50 ms.
  auto mb_waiting = b.new_mutex(
      name, {.expiry = 4s, .tries = 100000, .retry_delay = [](int) { return 50ms; }, .timeout_factor = 0.25});
  auto got_b = mb_waiting.lock(redsync::context::timeout(15s));
  const bool a_holds = got_a.ok() && ma.held();
  MESSAGE("B: ", got_b.describe());
  CHECK_MESSAGE(!(got_b.ok() && a_holds), "B got the name A holds; A: ", got_a.describe(),
                " B: ", got_b.describe());
  if (got_a.ok() && got_b.ok()) CHECK(mb_waiting.token().value > ma.token().value);
  if (got_b.ok()) (void)mb_waiting.unlock(redsync::context::timeout(5s));
  if (got_a.ok()) (void)ma.unlock(redsync::context::timeout(5s));
}

// Measured (passes; about 2-3 s here): a replica killed (SIGKILL) stops
// acknowledging, so its master's slots do not vote on that member until
// the cluster marks it failed (cluster-node-timeout, 1 s here, then the
// other masters' gossip) and a refusal makes the router read the map
// again; then the member votes with r = 0.
TEST_CASE(
    "a killed replica of a 3-shard member: the member votes again soon after the cluster marks it failed" *
    doctest::timeout(60)) {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  const std::string name = unique_name("review-replica-killed");
  redsync::Redsync a(std::vector<std::string>{cl.uri()}, redsync::test::short_guard());
  auto ma = a.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(redsync::test::all_vote(ma));
  cl[cl.owner(cluster_name_slot(name)) + 3].kill();
  const auto start = std::chrono::steady_clock::now();
  auto refused = ma.lock(redsync::context::timeout(5s));
  CHECK_MESSAGE(!refused.ok(), refused.describe());
  if (refused.ok()) (void)ma.unlock(redsync::context::timeout(5s));
  CHECK(redsync::test::all_vote(ma, 10s));
  MESSAGE("votes again after ",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s");
}

// Was an availability hole: a replica killed in a cluster of one master is
// never marked failed (no other master can), CLUSTER SHARDS kept listing it
// online, every WAIT fell short and the member never voted again. A
// one-master cluster cannot fail over on its own (a promotion needs a
// majority of masters' votes), so its shards get no WAIT now
// (cluster_router::replicas_of).
TEST_CASE("a killed replica of a one-shard member does not keep the member from voting" *
          doctest::timeout(60)) {
  redis_cluster cl(cluster_config{.masters = 1, .replicas = 1});
  redsync::Redsync a(std::vector<std::string>{cl.uri()}, redsync::test::short_guard());
  auto ma = a.new_mutex(unique_name("review-replica-killed-1shard"), {.expiry = 2s, .tries = 1});
  REQUIRE(redsync::test::all_vote(ma));
  cl[1].kill();
  // Well past the node-timeout (1 s) and the map's 5 s age.
  const bool votes = redsync::test::all_vote(ma, 10s);
  redis_client master(cl[0]);
  CHECK_MESSAGE(votes, "the member never voted; CLUSTER NODES: ", master.command({"CLUSTER", "NODES"}).str);
}

// A replica alive on the cluster bus whose replication link to its master
// is down (here: a wrong masteruser/masterauth, then its link killed) stays
// "online" in CLUSTER SHARDS, and Redis may still promote it (within
// cluster-replica-validity-factor) with the writes it lacks. So its
// master's slots do not vote on that member while the link is down (the
// failover check's WAIT falls short, and the reason says so), and vote
// again once the link is repaired (docs/cluster.md).
TEST_CASE(
    "a replica whose replication link is down keeps its master's slots from voting until it is repaired" *
    doctest::timeout(90)) {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  const std::string name = unique_name("review-replica-unlinked");
  const std::size_t master = cl.owner(cluster_name_slot(name));
  const std::size_t replica = 3 + master;
  redsync::Redsync a(std::vector<std::string>{cl.uri()}, redsync::test::short_guard());
  auto ma = a.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(redsync::test::all_vote(ma));
  redis_client r(cl[replica]);
  REQUIRE(r.command({"CONFIG", "SET", "masteruser", "nobody"}).str == "OK");
  REQUIRE(r.command({"CONFIG", "SET", "masterauth", "wrong"}).str == "OK");
  (void)r.command({"CLIENT", "KILL", "TYPE", "master"});
  REQUIRE(wait_until([&] { return r.info_field("replication", "master_link_status") == "down"; }, 5s));
  auto refused = ma.lock(redsync::context::timeout(10s));
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.describe().find("failover check") != std::string::npos, refused.describe());
  // Repaired: the link comes back, and so does the member's vote.
  REQUIRE(r.command({"CONFIG", "SET", "masteruser", ""}).str == "OK");
  REQUIRE(r.command({"CONFIG", "SET", "masterauth", ""}).str == "OK");
  REQUIRE(wait_until([&] { return r.info_field("replication", "master_link_status") == "up"; }, 20s));
  CHECK(redsync::test::all_vote(ma, 20s));
}

// Was a gap: the failover check counts the replicas of the master its map
// names for the slot. A MOVED sends the script on to another master, whose
// replicas nobody counted: with no replica listed for the map's owner no
// WAIT was sent at all, and the redirected script's yes counted whatever
// the new master's state (paused and replaced, say). Now a script answered
// by another master than the one counted gets no vote, and the map is read
// again (durable_wait.hpp, durable_spec::master).
TEST_CASE(
    "a script that a MOVED sends to a master whose replicas the map has not counted gets no vote; the next "
    "attempt counts" *
    doctest::timeout(90)) {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  const std::string name = unique_name("review-moved-uncounted");
  const std::uint16_t slot = cluster_name_slot(name);
  const std::size_t from = cl.owner(slot);
  const std::size_t to = (from + 1) % 3;
  redsync::Redsync a(std::vector<std::string>{cl.uri()}, redsync::test::short_guard());
  auto ma = a.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(redsync::test::all_vote(ma));
  // The owner's replica dies; once the cluster marks it failed, A's map
  // lists no replica there, so A's acquisitions go without WAIT.
  cl[from + 3].kill();
  REQUIRE(redsync::test::all_vote(ma, 20s));
  // The slot moves to a master with a replica; another client verifies it
  // there. A's map still names the old owner.
  cl.begin_migration(slot, from, to);
  cl.migrate_keys(slot, from, to);
  cl.finish_migration(slot, to);
  REQUIRE(wait_until([&] { return failover_review::owned_by(cl, slot, to); }, 10s));
  redsync::Redsync b(std::vector<std::string>{cl.uri()}, redsync::test::short_guard());
  auto mb = b.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(redsync::test::all_vote(mb, 20s));

  auto redirected = ma.try_lock(redsync::context::timeout(10s));
  CHECK_MESSAGE(!redirected.ok(), redirected.describe());
  CHECK_MESSAGE(redirected.describe().find("redirected") != std::string::npos, redirected.describe());
  if (redirected.ok()) (void)ma.unlock(redsync::context::timeout(5s));
  CHECK(redsync::test::all_vote(ma, 10s));
}

TEST_SUITE_END();
