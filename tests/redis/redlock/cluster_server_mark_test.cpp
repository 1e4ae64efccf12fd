// The server mark (lib/redlock/scripts/server_mark.hpp, docs/cluster.md "Who
// answered: the server mark"): a cluster member's acquisition reads who ran
// it from a mark kept in the slot, instead of an INFO before every call,
// and a vote whose mark is not the identity the client holds for that
// master does not count. Real clusters, real servers.
#include "cluster_votes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/server_mark.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using redsync::detail::cluster_server_mark_key;
using namespace redsync::test;

namespace {

long long calls_on_every_node(redis_cluster& cl, const std::string& command) {
  long long n = 0;
  for (std::size_t i = 0; i < cl.size(); ++i) n += redis_client(cl[i]).calls(command);
  return n;
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

// Was the cost of issue 32 (item 6): the router sent INFO (3 KB) before
// every call on a cluster member, half of the servers' time per lock.
TEST_CASE(
    "lock and unlock cycles and semaphore permits on a cluster member send no INFO: the acquisition reads "
    "the slot's server mark") {
  redis_cluster cl(cluster_config{.masters = 3});
  const std::string name = unique_name("mark-hot-path");
  redsync::Redsync rs(std::vector<std::string>{cl.uri()}, short_guard());
  auto m = rs.new_mutex(name, {.expiry = 3s, .tries = 1});
  REQUIRE(all_vote(m));
  auto sem = rs.new_semaphore(name + "-sem", 2, {.expiry = 3s});
  REQUIRE(sem.acquire(redsync::context::timeout(10s)).permit.release(redsync::context::timeout(5s)).ok());
  for (std::size_t i = 0; i < cl.size(); ++i) redis_client(cl[i]).reset_stats();

  constexpr int cycles = 30;
  for (int k = 0; k < cycles; ++k) {
    auto r = m.lock(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());
    auto p = sem.acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(p.ok(), p.describe());
    REQUIRE(p.permit.release(redsync::context::timeout(5s)).ok());
  }
  CHECK(calls_on_every_node(cl, "info") == 0);
  // Every acquisition read the mark (OBJECT ENCODING) instead.
  CHECK(calls_on_every_node(cl, "object|encoding") >= 2 * cycles);

  // The mark of the name's slot: 40 hex digits, stored raw on its master,
  // never copied to another node (none has the slot's keys but the owner).
  const std::size_t owner = cl.owner(cluster_name_slot(name));
  redis_client master(cl[owner]);
  const std::string key = cluster_server_mark_key(cluster_name_slot(name));
  const auto mark = master.get(key);
  REQUIRE(mark.has_value());
  CHECK(mark->size() == 40);
  CHECK(master.command({"OBJECT", "ENCODING", key}).str == "raw");
}

// A load in place keeps the connection, the run_id and the replication id;
// only the mark (loaded back "embstr") and INFO's load counts change. The
// client that kept its connection held the identity from before the load,
// which the record (rolled back with the snapshot) still names.
TEST_CASE(
    "a cluster master that loads an older snapshot in place does not vote for a client whose connection "
    "saw it before; the name comes back with a larger token") {
  redis_cluster cl(cluster_config{.masters = 3, .server = {.extra_args = {"--enable-debug-command", "yes"}}});
  const std::string name = unique_name("mark-reload");
  const std::size_t owner = cl.owner(cluster_name_slot(name));
  redsync::Redsync a_rs(std::vector<std::string>{cl.uri()}, short_guard());
  redsync::Redsync b_rs(std::vector<std::string>{cl.uri()}, short_guard());
  auto a = a_rs.new_mutex(name, {.expiry = 3s, .tries = 1});
  auto b = b_rs.new_mutex(name, {.expiry = 3s, .tries = 1});
  REQUIRE(all_vote(a));
  REQUIRE(all_vote(b));  // B's connection to the owner identified it, before the load
  REQUIRE(redis_client(cl[owner]).command({"SAVE"}).str == "OK");

  auto held = a.lock(redsync::context::timeout(10s));
  REQUIRE_MESSAGE(held.ok(), held.describe());
  // The snapshot has neither A's key nor the counter's increment.
  REQUIRE(redis_client(cl[owner]).command({"DEBUG", "RELOAD", "NOSAVE"}).str == "OK");
  REQUIRE_FALSE(redis_client(cl[owner]).get(cluster_lock_key(name)).has_value());

  auto at_once = b.try_lock(redsync::context::timeout(10s));
  CHECK_MESSAGE(!at_once.ok(), "two holders: ", at_once.describe());
  REQUIRE(at_once.nodes.size() == 1);
  CHECK(at_once.nodes[0].status == redsync::node_status::excluded);
  CHECK_MESSAGE(at_once.nodes[0].message.find("no longer the server") != std::string::npos,
                at_once.nodes[0].message);
  if (at_once.ok()) return;

  // Once A's lock has expired and the record was repaired for the reloaded
  // server, B gets the name, with a token above A's.
  auto later = b_rs.new_mutex(name, {.expiry = 3s, .tries = 10000, .retry_delay = [](int) { return 50ms; }});
  auto r = later.lock(redsync::context::timeout(30s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  CHECK(std::chrono::steady_clock::now() > a.until());
  CHECK(later.token() > a.token());
  (void)later.unlock(redsync::context::timeout(5s));
}
