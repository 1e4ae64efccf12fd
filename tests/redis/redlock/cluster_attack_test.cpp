// Attacks on a Redlock set whose members are whole Redis Clusters
// (docs/cluster.md), against real clusters: failovers that lose a lock key,
// a paused master that comes back, redirections, migrations, and odd
// cluster URIs. A test marked may_fail pins a suspected hole (with the
// fix it needs); the others pin a guarantee.
#include "cluster_votes.hpp"
#include "fresh_nodes.hpp"
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
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using namespace redsync::test;

namespace {

// How long the servers get to finish a failover or a resynchronisation that
// a test waits for (not the library: only the servers are asked). Under
// TSan with four shards at once, a demoted master's full resynchronisation
// of the 48 MB below took longer than 20 s, and once (three TSan shards on
// a cold CI-like run) longer than 60 s.
constexpr auto cluster_settles_within = 150s;

// Node `i` of `cl` is a master (or a replica, `role` "slave") with its
// replication link up, and every other running node agrees on who serves
// `slot`.
bool settled(redis_cluster& cl, std::size_t i, const std::string& role, std::uint16_t slot,
             std::size_t owner) {
  redis_client c(cl[i]);
  if (c.info_field("replication", "role") != role) return false;
  if (role == "slave" && c.info_field("replication", "master_link_status") != "up") return false;
  for (std::size_t k = 0; k < cl.size(); ++k) {
    if (!cl[k].running() || cl[k].paused()) continue;
    try {
      if (cl.owner(slot, k) != owner) return false;
    } catch (const std::runtime_error&) {
      return false;  // mid-failover a node may know no owner of the slot for a moment
    }
  }
  return true;
}

// Waits until settled(), polling every 50 ms (each poll opens a connection
// to every node, which a 2 ms poll turned into hundreds a second on a
// loaded machine). `when_slow` runs once, a third of the way into the bound.
bool settles(redis_cluster& cl, std::size_t i, const std::string& role, std::uint16_t slot, std::size_t owner,
             const std::function<void()>& when_slow = {}) {
  const auto start = std::chrono::steady_clock::now();
  bool slow = false;
  while (!settled(cl, i, role, slot, owner)) {
    const auto now = std::chrono::steady_clock::now();
    if (when_slow && !slow && now >= start + cluster_settles_within / 3) {
      slow = true;
      when_slow();
    }
    if (now >= start + cluster_settles_within) {
      if (settled(cl, i, role, slot, owner)) return true;
      MESSAGE("node ", i, " is not yet a ", role, " with slot ", slot, " served by node ", owner,
              " everywhere:\n", cl.describe(slot), "log of node ", i, ":\n", cl[i].log_tail(40));
      return false;
    }
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

// Replica `r` takes its master's slots over (CLUSTER FAILOVER TAKEOVER) and
// the cluster settles. A TAKEOVER is carried out in the command itself, so
// `r` answers as a master at once; one that still calls itself a replica a
// third of the way into the bound is asked again (said in a message), so
// that a failover the servers dropped is told apart from one they never
// finish spreading.
bool taken_over(redis_cluster& cl, std::size_t r, std::uint16_t slot) {
  auto take_over = [&] {
    redis_client promoted(cl[r]);
    const auto answer = promoted.command({"CLUSTER", "FAILOVER", "TAKEOVER"});
    REQUIRE_MESSAGE(answer.str == "OK", "CLUSTER FAILOVER TAKEOVER: ", answer.str);
  };
  take_over();
  return settles(cl, r, "master", slot, r, [&] {
    if (redis_client(cl[r]).info_field("replication", "role") != "slave") return;
    MESSAGE("node ", r, " is still a replica after its TAKEOVER; asking again:\n", cl.describe(slot));
    take_over();
  });
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

// Was a hole (two holders, and a token that did not increase): a cluster
// master's identity (run_id, master_replid) was read once, from the
// handshake INFO of the client's connection, and a role change does not
// close normal client connections. Here the old master M is demoted, fully
// resynchronised from the promoted replica R (which never got A's lock key
// and whose record still names M's old identity, unrepaired), then promoted
// back: its data was replaced and its master_replid changed, but a client
// that kept its connection still held M's handshake identity, which
// matched the record, so the slot counted as verified with no guard window
// and B got the name A holds. Now the acquisition answers the server mark
// (lib/redlock/scripts/server_mark.hpp): M's was loaded with the resynchronisation,
// so M writes a new one from its INFO, which does not match B's handshake
// identity; B's vote is refused and B reads M's INFO again. This test also
// pins the mark's assumption: a full resynchronisation must not keep it raw.
TEST_CASE(
    "a master demoted, resynchronised from a replica that lost a lock key, and promoted back does not vote "
    "for a client whose connection saw it before") {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  const std::string name = unique_name("attack-failback");
  const std::uint16_t slot = cluster_name_slot(name);
  const std::size_t m = cl.owner(slot);
  const std::size_t r = m + 3;

  // B verifies the slot on M first, with expiry 2 s (the record's window).
  redsync::Redsync b(std::vector<std::string>{cl.uri()}, short_guard());
  auto mb = b.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(all_vote(mb));
  // A's expiry (10 s) is its guard window: it votes once the record is that
  // old. The record then says 10 s, which B's guard takes too.
  redsync::Redsync a(std::vector<std::string>{cl.uri()}, short_guard());
  auto ma = a.new_mutex(name, {.expiry = 10s, .tries = 1});
  REQUIRE(all_vote(ma));

  // A's lock key reaches M but never R: R is paused, and M's replication
  // stream to it is held up behind 48 MB that fill the socket buffers, so
  // A's write is still in M's output buffer when M is paused too.
  cl[r].pause();
  {
    redis_client master(cl[m]);
    const std::string junk(8 << 20, 'x');
    for (int k = 0; k < 6; ++k)
      REQUIRE(master.command({"SET", "{" + name + "}:junk" + std::to_string(k), junk}).str == "OK");
  }
  // While A's map lists R online, M's yes needs R's acknowledgement (the
  // failover check, durable_wait.hpp), so the key cannot be counted on M
  // alone: that is the check's own guarantee.
  auto refused = ma.lock(redsync::context::timeout(10s));
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.describe().find("failover check") != std::string::npos, refused.describe());
  // The attack below needs M to count a key that R never got: R must be
  // out of A's map (the cluster marked it failed, and the refusal made A
  // read the map again). A manual TAKEOVER by a replica marked failed is
  // the one failover the check's assumption leaves out; the identity read
  // with every call and the restart guard still keep B out.
  REQUIRE(wait_until(
      [&] {
        redis_client master(cl[m]);
        const std::string nodes = master.command({"CLUSTER", "NODES"}).str;
        const std::size_t at = nodes.find(cl.id(r));
        return at != std::string::npos && nodes.find(",fail ", at) < nodes.find('\n', at);
      },
      cluster_settles_within));
  auto ma_retrying =
      a.new_mutex(name, {.expiry = 10s, .tries = 50, .retry_delay = [](int) { return 100ms; }});
  auto ra = ma_retrying.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(ra.ok(), ra.describe());
  // M goes silent, R takes the slot over without it. M must not take the
  // slot back on its own once it follows R: R took over while the others
  // still had it marked failed, so to M (a replica with no data age limit
  // in these clusters) R can look failed, and M's own failover would come
  // back before its resynchronisation (seen once under ASan on CI: M a
  // master again with no link). The manual failover below still works.
  {
    redis_client master(cl[m]);
    REQUIRE(master.command({"CONFIG", "SET", "cluster-replica-no-failover", "yes"}).str == "OK");
  }
  cl[m].pause();
  cl[r].resume();
  REQUIRE(taken_over(cl, r, slot));
  // M comes back as R's replica (a full resynchronisation: A's key is gone),
  // then is promoted back.
  cl[m].resume();
  // R took over while the cluster still had it marked failed; now and then
  // (twice in many runs, on a loaded machine) M stayed a master without
  // slots instead of following R. An operator then makes it R's replica:
  // CLUSTER REPLICATE refuses a master that holds keys, so its data goes
  // first (FLUSHALL), as the full resynchronisation would replace it anyway.
  if (!wait_until([&] { return redis_client(cl[m]).info_field("replication", "role") == "slave"; }, 30s)) {
    redis_client stuck(cl[m]);
    MESSAGE("M stayed a master: making it R's replica by hand");
    (void)stuck.command({"FLUSHALL"});
    const auto replicate = stuck.command({"CLUSTER", "REPLICATE", cl.id(r)});
    REQUIRE_MESSAGE(replicate.str == "OK", "CLUSTER REPLICATE: ", replicate.str);
  }
  const bool resynchronised = settles(cl, m, "slave", slot, r);
  if (!resynchronised) {
    redis_client back(cl[m]);
    REQUIRE_MESSAGE(resynchronised, "role ", back.info_field("replication", "role"), ", link ",
                    back.info_field("replication", "master_link_status"), ", sync in progress ",
                    back.info_field("replication", "master_sync_in_progress"), ", bytes left ",
                    back.info_field("replication", "master_sync_left_bytes"));
  }
  {
    redis_client back(cl[m]);
    CHECK(back.command({"READONLY"}).str == "OK");
    CHECK_FALSE(back.get(cluster_lock_key(name)).has_value());  // the key A holds is lost
    REQUIRE(back.command({"CLUSTER", "FAILOVER"}).str == "OK");
  }
  const bool back_as_master = settles(cl, m, "master", slot, m);
  REQUIRE_MESSAGE(back_as_master, "role ", redis_client(cl[m]).info_field("replication", "role"));

  // A still holds the name (10 s); B must be kept out.
  REQUIRE(ma_retrying.held());
  auto rb = mb.try_lock(redsync::context::timeout(10s));
  CHECK_MESSAGE(!rb.ok(), "B got the name A holds: ", rb.describe());
  if (rb.ok()) {
    // And its fencing token does not even exceed A's: the counter came from
    // R, which lost A's increment with A's key.
    CHECK(mb.token().value > ma_retrying.token().value);
    (void)mb.unlock(redsync::context::timeout(5s));
  }
  // A fresh client is kept out (its handshake reads M's new identity).
  redsync::Redsync c(std::vector<std::string>{cl.uri()}, short_guard());
  auto mc = c.new_mutex(name, {.expiry = 2s, .tries = 1});
  auto rc = mc.try_lock(redsync::context::timeout(10s));
  CHECK_MESSAGE(!rc.ok(), rc.describe());
  (void)ma_retrying.unlock(redsync::context::timeout(5s));
}

// A master that is paused (SIGSTOP) answers nothing, but a TCP connection
// to it opens and a command to it waits for its whole timeout. When its
// replica took over, the member must find the new master: its map read
// must not spend the command's whole time on the silent master.
TEST_CASE("a paused master whose replica took over: the member finds the promoted replica and votes again" *
          doctest::timeout(120)) {
  redis_cluster cl(cluster_config{.masters = 1, .replicas = 1});
  const std::string name = unique_name("attack-paused-refresh");
  redsync::Redsync a(std::vector<std::string>{cl.uri()}, short_guard());
  auto ma = a.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(all_vote(ma));
  cl[0].pause();
  REQUIRE(taken_over(cl, 1, 0));
  // The promoted replica votes once repaired and past the guard window
  // (about 2 s, and a map read of at most 1 s); a member that keeps asking
  // the silent master for the map waits until the pool drops that
  // connection (stall_close: 10 s at least).
  const auto start = std::chrono::steady_clock::now();
  CHECK(all_vote(ma));
  MESSAGE("votes again after ",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s");
  cl[0].resume();
}

// UNCONFIRMED (may_fail, passed 5 of 5 runs here): a master paused (SIGSTOP)
// while its replica is promoted keeps its identity; when it resumes it is
// still a master until the cluster bus tells it otherwise, and B's router
// (whose map predates the failover) has a command already waiting in its
// socket. Redis has read the bus first in every run (B is redirected to the
// new master and finds the name taken), but nothing in redsync enforces
// that order: if it ever runs B's call first, the old master grants a name
// the promoted one holds. A guard would need the member to distrust a
// master it has not heard from for cluster-node-timeout.
TEST_CASE(
    "a paused master that resumes after its replica took over does not grant a name the promoted master "
    "holds" *
    doctest::may_fail()) {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  const std::string name = unique_name("attack-zombie");
  const std::uint16_t slot = cluster_name_slot(name);
  const std::size_t m = cl.owner(slot);
  const std::size_t r = m + 3;
  redsync::Redsync a(std::vector<std::string>{cl.uri()}, short_guard());
  auto ma = a.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(all_vote(ma));
  redsync::Redsync b(std::vector<std::string>{cl.uri()}, short_guard());
  auto mb = b.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(all_vote(mb));

  cl[m].pause();
  REQUIRE(taken_over(cl, r, slot));
  // A gets the name on the promoted master once it votes there.
  auto ma_long = a.new_mutex(name, {.expiry = 2s, .tries = 100000});
  auto ra = ma_long.lock(redsync::context::timeout(30s));
  REQUIRE_MESSAGE(ra.ok(), ra.describe());
  // B asks the paused master (its map is stale), which resumes meanwhile.
  auto rb = std::async(std::launch::async, [&] { return mb.try_lock(redsync::context::timeout(10s)); });
  std::this_thread::sleep_for(30ms);
  cl[m].resume();
  auto got = rb.get();
  CHECK_MESSAGE(!(got.ok() && ma_long.held()), "B got the name A holds: ", got.describe());
  if (got.ok()) (void)mb.unlock(redsync::context::timeout(5s));
  (void)ma_long.unlock(redsync::context::timeout(5s));
}

// Was a hole (two holders; the review's schedule, issue 32): B holds N with
// auto-extension over three members. The masters of N's slot on members 1
// and 2 are paused past node-timeout and past B's expiry, and the clusters
// promote their replicas; B keeps extending through the promoted masters.
// A, whose maps still name the paused masters, sends its lock, and 0.3 s
// later both old masters resume: they run A's script before they hear of
// their demotion (which reaches them on cluster-bus links they have yet to
// accept), and B's key on them has expired. Before the failover check, both
// votes counted (the records still name them) and A held N while B did.
// Now a cluster member's yes counts only when every replica its map lists
// online for the shard acknowledged the script (durable_wait.hpp): the old
// masters' replicas were promoted, so nobody acknowledges there.
TEST_CASE(
    "paused masters replaced on two members of three and resumed under a stale client's lock do not "
    "give it a name another client holds" *
    doctest::timeout(180)) {
  std::vector<std::unique_ptr<redis_cluster>> members;
  std::vector<std::string> uris;
  for (int k = 0; k < 3; ++k) {
    members.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3, .replicas = 1}));
    uris.push_back(members.back()->uri());
  }
  const std::string name = unique_name("attack-stale-votes");
  const std::uint16_t slot = cluster_name_slot(name);
  // B's expiry covers the two elections with room to spare (B extends
  // through the third member and the promoted masters; under TSan an
  // election took over 2 s), and the pause outlasts it.
  constexpr auto b_expiry = 6s;
  redsync::Redsync b(uris, short_guard());
  auto mb = b.new_mutex(name, {.expiry = b_expiry, .tries = 1});
  REQUIRE(all_vote(mb));
  // A's command timeout (5 % of 10 s) outlasts the 0.3 s its request waits
  // in the paused masters' sockets.
  redsync::Redsync a(uris, short_guard());
  auto ma = a.new_mutex(name, {.expiry = 10s, .tries = 1});
  REQUIRE(all_vote(ma));

  auto mb_held = b.new_mutex(name, {.expiry = b_expiry, .tries = 100, .auto_extend = true});
  auto rb = mb_held.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(rb.ok(), rb.describe());
  std::size_t paused[2] = {0, 0};
  const auto paused_at = std::chrono::steady_clock::now();
  for (int k = 0; k < 2; ++k) {
    paused[k] = members[k]->owner(slot);
    (*members[k])[paused[k]].pause();
  }
  // The clusters mark the silent masters failed (node-timeout 1 s) and
  // elect their replicas.
  for (int k = 0; k < 2; ++k) {
    const std::size_t replica = paused[k] + 3;
    REQUIRE(settles(*members[k], replica, "master", slot, replica));
  }
  // The pause outlasts B's expiry, so the old masters' copies of B's key
  // have expired when they resume; B must still hold through the others.
  std::this_thread::sleep_until(paused_at + b_expiry + 500ms);
  REQUIRE_MESSAGE(mb_held.held(), "B lost the lock through the failovers");

  auto ra = std::async(std::launch::async, [&] { return ma.try_lock(redsync::context::timeout(10s)); });
  std::this_thread::sleep_for(300ms);
  for (int k = 0; k < 2; ++k) (*members[k])[paused[k]].resume();
  auto got = ra.get();
  const bool b_still_holds = mb_held.held();
  CHECK_MESSAGE(!(got.ok() && b_still_holds), "A got the name B holds: ", got.describe());
  if (!got.ok()) {
    // Each resumed old master's yes was refused by the failover check, or
    // never came (it heard of its demotion first and redirected A).
    MESSAGE("A was refused: ", got.describe());
  } else {
    (void)ma.unlock(redsync::context::timeout(5s));
  }
  (void)mb_held.unlock(redsync::context::timeout(5s));
}

// Was slow (issue 32, item 3): a promoted master was marked (its guard
// window started) only at the first yes it gave, which for a held name
// comes after the holder's release: B, retrying every 50 ms, waited a whole
// window after A's unlock although the failovers were long over. Now the
// window starts when a client's map shows the new master (a look marks it
// then, engine::on_failover_seen), so B gets the name soon after the unlock.
TEST_CASE(
    "a failover seen while a name is held starts the promoted master's guard window then, not at the "
    "release" *
    doctest::timeout(120)) {
  std::vector<std::unique_ptr<redis_cluster>> members;
  std::vector<std::string> uris;
  for (int k = 0; k < 3; ++k) {
    members.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 1, .replicas = 1}));
    uris.push_back(members.back()->uri());
  }
  const std::string name = unique_name("attack-window-start");
  constexpr auto window = 6s;  // the expiry: every client's guard window
  redsync::Redsync a(uris, short_guard());
  auto ma = a.new_mutex(name, {.expiry = window, .tries = 1, .auto_extend = true});
  redsync::Redsync b(uris, short_guard());
  auto mb = b.new_mutex(name, {.expiry = window, .tries = 1});
  REQUIRE(all_vote(mb));
  REQUIRE(all_vote(ma));
  auto ra = ma.lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(ra.ok(), ra.describe());
  for (int k = 0; k < 2; ++k) {
    redis_client replica((*members[k])[1]);
    REQUIRE(replica.command({"CLUSTER", "FAILOVER", "TAKEOVER"}).str == "OK");
  }
  for (int k = 0; k < 2; ++k) REQUIRE(settles(*members[k], 1, "master", 0, 1));
  const auto failed_over = std::chrono::steady_clock::now();
  // B waits for the name, retrying every 50 ms.
  auto mb_waiting =
      b.new_mutex(name, {.expiry = window, .tries = 100000, .retry_delay = [](int) { return 50ms; }});
  auto rb = std::async(std::launch::async, [&] { return mb_waiting.lock(redsync::context::timeout(60s)); });
  // A keeps the name a whole window past the failovers (its extensions go
  // to the promoted masters), then lets go.
  std::this_thread::sleep_until(failed_over + window + 1s);
  REQUIRE_MESSAGE(ma.held(), "A lost the name through the failovers");
  const auto released = std::chrono::steady_clock::now();
  (void)ma.unlock(redsync::context::timeout(5s));
  auto got = rb.get();
  const auto waited = std::chrono::steady_clock::now() - released;
  REQUIRE_MESSAGE(got.ok(), got.describe());
  // Generous: well under the window, which the old rule waited in full.
  CHECK_MESSAGE(waited < window / 2, "B got the name ", std::chrono::duration<double>(waited).count(),
                " s after A's unlock");
  (void)mb_waiting.unlock(redsync::context::timeout(5s));
}

// A cluster that lost a master with no replica answers every command with
// CLUSTERDOWN (cluster-require-full-coverage) until the master is back. The
// release did not run there, like under TRYAGAIN: it must be retried, not
// dropped, or the name stays taken on that member until its expiry.
TEST_CASE("a release answered CLUSTERDOWN is retried and lands once the cluster is back") {
  redis_cluster cl(cluster_config{.masters = 3});
  const std::string name = unique_name("attack-clusterdown");
  const std::string key = cluster_lock_key(name);
  const std::uint16_t slot = cluster_name_slot(name);
  const std::size_t m = cl.owner(slot);
  const std::size_t other = (m + 1) % 3;
  redsync::Redsync rs(std::vector<std::string>{cl.uri()}, fresh_nodes());
  auto mx = rs.new_mutex(name, {.expiry = 30s, .tries = 1});
  auto r = mx.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  redis_client owner(cl[m]);
  cl[other].kill();
  REQUIRE(wait_until(
      [&] {
        return owner.command({"CLUSTER", "INFO"}).str.find("cluster_state:fail") != std::string::npos;
      },
      20s));
  auto u = mx.unlock(redsync::context::timeout(10s));
  CHECK_FALSE(u.ok());
  REQUIRE(u.nodes.size() == 1);
  CHECK(u.nodes[0].message.find("CLUSTERDOWN") != std::string::npos);
  cl[other].restart();
  REQUIRE(cl.wait_ok(20s));
  // Long before the key's 30 s expiry.
  CHECK(wait_until([&] { return !owner.get(key).has_value(); }, 10s));
}

// Was a hole (availability): a member whose first seed is a replica reads
// the map there and keeps that connection; once that replica is promoted,
// every call of its slots went over the same connection, whose handshake
// said "replica", so the member never voted for those slots again. Fixed
// by the server mark (above): the promoted seed's mark differs from the
// handshake's identity, so the client reads its INFO again.
TEST_CASE("a replica given as the first seed and promoted later votes for its slots once repaired" *
          doctest::timeout(90)) {
  redis_cluster cl(cluster_config{.masters = 1, .replicas = 1});
  const std::string uri = "redis+cluster://127.0.0.1:" + std::to_string(cl[1].port()) +
                          ",127.0.0.1:" + std::to_string(cl[0].port());
  redsync::Redsync a(std::vector<std::string>{uri}, short_guard());
  const std::string name = unique_name("attack-replica-seed");
  auto ma = a.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(all_vote(ma));
  {
    redis_client replica(cl[1]);
    REQUIRE(replica.command({"CLUSTER", "FAILOVER"}).str == "OK");
  }
  REQUIRE(settles(cl, 1, "master", 0, 1));
  std::string why;
  const bool votes = wait_until(
      [&] {
        auto r = ma.lock(redsync::context::timeout(20s));
        if (!r.nodes.empty()) why = r.nodes[0].message;
        if (r.ok()) (void)ma.unlock(redsync::context::timeout(5s));
        return r.ok();
      },
      30s);
  CHECK_MESSAGE(votes, "the promoted seed never voted: ", why);
}

// Two members that are one cluster (different seeds) are one set of
// servers: the same master must not vote twice for one name.
TEST_CASE("one cluster listed as two members (different seeds) does not make a quorum alone") {
  redis_cluster cl(cluster_config{.masters = 3});
  redsync::test::cluster standalone(1);
  const auto seed = [&](std::size_t i) {
    return "redis+cluster://127.0.0.1:" + std::to_string(cl[i].port());
  };
  redsync::Redsync rs(std::vector<std::string>{seed(0), seed(1), standalone[0].uri()}, short_guard());
  const std::string name = unique_name("attack-twice");
  auto m = rs.new_mutex(name, {.expiry = 2s, .tries = 1});
  // Every member counts once the guard windows passed, the standalone node
  // included: 2 of 3 votes needs it.
  REQUIRE(wait_until(
      [&] {
        auto r = m.lock(redsync::context::timeout(20s));
        if (r.ok()) (void)m.unlock(redsync::context::timeout(5s));
        return r.ok();
      },
      30s));
  standalone[0].kill();
  for (int i = 0; i < 3; ++i) {
    auto r = m.lock(redsync::context::timeout(10s));
    CHECK_MESSAGE(!r.ok(), "one cluster voted twice: ", r.describe());
    if (r.ok()) (void)m.unlock(redsync::context::timeout(5s));
  }
}

// A standalone server given as a cluster member never votes, and says why.
TEST_CASE("a standalone server given as redis+cluster:// is refused with the reason") {
  redsync::test::cluster standalone(1);
  const std::string uri = "redis+cluster://127.0.0.1:" + std::to_string(standalone[0].port());
  redsync::Redsync rs(std::vector<std::string>{uri}, fresh_nodes());
  auto m = rs.new_mutex(unique_name("attack-not-cluster"), {.expiry = 2s, .tries = 1});
  auto r = m.lock(redsync::context::timeout(10s));
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.nodes.size() == 1);
  CHECK(r.nodes[0].message.find("cluster support disabled") != std::string::npos);
  redis_client c(standalone[0]);
  CHECK(c.dbsize() == 0);  // nothing was written there
}

// The slot's record on one member loses the holder's counter increment in a
// failover (never replicated); the fencing token of the next lock still
// exceeds the holder's: the promoted master's record is repaired from the
// other members' before it votes.
TEST_CASE("a failover that loses a slot's counter increment on one member: the next token is still larger") {
  std::vector<std::unique_ptr<redis_cluster>> cls;
  cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3, .replicas = 1}));
  cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3}));
  cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3}));
  const std::vector<std::string> uris{cls[0]->uri(), cls[1]->uri(), cls[2]->uri()};
  const std::string name = unique_name("attack-token");
  redsync::Redsync a(uris, short_guard());
  auto ma = a.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(all_vote(ma));
  redis_cluster& cl = *cls[0];
  const std::uint16_t slot = cluster_name_slot(name);
  const std::size_t m = cl.owner(slot);
  const std::size_t r = m + 3;
  // As in the failback test: the replica never gets A's increment.
  cl[r].pause();
  {
    redis_client master(cl[m]);
    const std::string junk(8 << 20, 'x');
    for (int k = 0; k < 6; ++k)
      REQUIRE(master.command({"SET", "{" + name + "}:junk" + std::to_string(k), junk}).str == "OK");
  }
  auto ra = ma.lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(ra.ok(), ra.describe());
  const auto held = ma.token().value;
  (void)ma.unlock(redsync::context::timeout(5s));
  cl[m].kill();
  cl[r].resume();
  REQUIRE(taken_over(cl, r, slot));
  {
    // The loss is real: the promoted master's counter is below A's token.
    redis_client promoted(cl[r]);
    const auto fence = promoted.command({"HGET", redsync::detail::cluster_record_key(slot), "fence"});
    REQUIRE(fence.type == redis_client::reply::kind::string);
    CHECK(std::stoll(fence.str) < static_cast<long long>(held));
  }
  // Every token from now on, the promoted member's vote included once it
  // counts, exceeds the lost one.
  redsync::Redsync b(uris, short_guard());
  auto mb = b.new_mutex(name, {.expiry = 2s, .tries = 1});
  bool all = false;
  for (int k = 0; k < 200 && !all; ++k) {
    auto rb = mb.lock(redsync::context::timeout(10s));
    if (!rb.ok()) continue;
    CHECK(mb.token().value > held);
    all = rb.nodes[0].status == redsync::node_status::ok;
    (void)mb.unlock(redsync::context::timeout(5s));
    if (!all) std::this_thread::sleep_for(100ms);
  }
  CHECK(all);
}

// A slot moved to another master while a name of it is held: clients whose
// maps still name the old master follow MOVED; the holder extends there,
// and another client is kept out (the key moved with the slot, and the
// moved record names the old master, so the new one does not vote for a
// guard window anyway).
TEST_CASE(
    "a slot moved while a name of it is held: the holder extends through MOVED, another client is kept out") {
  redis_cluster cl(cluster_config{.masters = 3});
  const std::string name = unique_name("attack-moved");
  const std::uint16_t slot = cluster_name_slot(name);
  redsync::Redsync a(std::vector<std::string>{cl.uri()}, short_guard());
  auto ma = a.new_mutex(name, {.expiry = 4s, .tries = 1});
  REQUIRE(all_vote(ma));
  redsync::Redsync b(std::vector<std::string>{cl.uri()}, short_guard());
  auto mb = b.new_mutex(name, {.expiry = 2s, .tries = 1});
  REQUIRE(all_vote(mb));
  auto ra = ma.lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(ra.ok(), ra.describe());
  const std::size_t from = cl.owner(slot);
  const std::size_t to = (from + 1) % 3;
  cl.begin_migration(slot, from, to);
  cl.migrate_keys(slot, from, to);
  cl.finish_migration(slot, to);
  REQUIRE(cl.wait_ok(20s));
  auto e = ma.extend(redsync::context::timeout(10s));
  CHECK_MESSAGE(e.ok(), e.describe());
  auto rb = mb.try_lock(redsync::context::timeout(10s));
  CHECK_MESSAGE(!rb.ok(), "B got the name A holds: ", rb.describe());
  if (rb.ok()) (void)mb.unlock(redsync::context::timeout(5s));
  auto u = ma.unlock(redsync::context::timeout(10s));
  CHECK_MESSAGE(u.ok(), u.describe());
  redis_client owner(cl[to]);
  CHECK_FALSE(owner.get(cluster_lock_key(name)).has_value());
}

// A master of a cluster member also listed as a standalone member: it must
// not add a second vote of that server (in the standalone layout its keys
// span slots, which a cluster node refuses; and one server never votes
// twice anyway).
TEST_CASE("a cluster member's master also listed as a standalone member does not make a quorum with it") {
  redis_cluster cl(cluster_config{.masters = 3});
  redsync::test::cluster standalone(1);
  const std::string name = unique_name("attack-listed-twice");
  const std::size_t m = cl.owner(cluster_name_slot(name));
  redsync::Redsync rs(std::vector<std::string>{cl.uri(), cl[m].uri(), standalone[0].uri()}, short_guard());
  auto mx = rs.new_mutex(name, {.expiry = 2s, .tries = 1});
  // Node 2 is named as the cluster's master and never votes. (Its looks
  // fail, keyed in the standalone layout across slots, so a brand-new set
  // that needs every node once never gets started either: fail closed.)
  auto first = mx.lock(redsync::context::timeout(20s));
  REQUIRE(first.nodes.size() == 3);
  CHECK(first.nodes[1].status != redsync::node_status::ok);
  if (first.ok()) (void)mx.unlock(redsync::context::timeout(5s));
  standalone[0].kill();
  for (int i = 0; i < 3; ++i) {
    auto r = mx.lock(redsync::context::timeout(10s));
    CHECK_MESSAGE(!r.ok(), "one server voted twice: ", r.describe());
    if (r.ok()) (void)mx.unlock(redsync::context::timeout(5s));
  }
}

TEST_SUITE_END();
