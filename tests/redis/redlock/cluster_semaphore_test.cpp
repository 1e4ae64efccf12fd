// A Semaphore over cluster members (docs/cluster.md): its keys carry the
// name's hash tag as a Mutex's do, its node record is the one of the name's
// slot, a mixed set keeps standalone keys on standalone nodes, and a waiter
// is woken by a release (SPUBLISH, heard by an SSUBSCRIBE on the slot's
// master). Against real local clusters.
#include "fresh_nodes.hpp"
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
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using redsync::detail::cluster_record_key;
using redsync::detail::key_slot;
using namespace redsync::test;

namespace {

// `argv` on the master that serves `key`'s slot in `cl`.
redis_client::reply on_owner(redis_cluster& cl, const std::string& key,
                             const std::vector<std::string>& argv) {
  redis_client c(cl[cl.owner(key_slot(key))]);
  return c.command(argv);
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

TEST_CASE(
    "a semaphore of two permits over three cluster members grants two, refuses a third, in the name's slot") {
  std::vector<std::unique_ptr<redis_cluster>> cls;
  for (int i = 0; i < 3; ++i) cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3}));
  const std::vector<std::string> uris{cls[0]->uri(), cls[1]->uri(), cls[2]->uri()};
  redsync::Redsync rs(uris, fresh_nodes());
  const std::string name = unique_name("cluster-sem");
  auto sem = rs.new_semaphore(name, 2, {.expiry = 5s});
  auto a = sem.try_acquire(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(a.ok(), a.describe());
  auto b = sem.try_acquire(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(b.ok(), b.describe());
  CHECK(a.permit.slot() != b.permit.slot());
  CHECK(a.permit.token().value > 0);

  redsync::Redsync other(uris, fresh_nodes());
  auto sem2 = other.new_semaphore(name, 2, {.expiry = 5s});
  CHECK(sem2.try_acquire(redsync::context::timeout(10s)).outcome.error == redsync::errc::busy);

  const std::string set_key = "redsync:sem:" + cluster_lock_key(name);
  const std::string record = cluster_record_key(cluster_name_slot(name));
  CHECK(key_slot(set_key) == cluster_name_slot(name));
  for (auto& cl : cls) {
    CHECK(on_owner(*cl, set_key, {"ZCARD", set_key}).integer == 2);
    CHECK(on_owner(*cl, record, {"HEXISTS", record, "fence"}).integer == 1);
  }
  auto e = a.permit.extend(redsync::context::timeout(10s));
  CHECK_MESSAGE(e.ok(), e.describe());
  auto r = a.permit.release(redsync::context::timeout(10s));
  CHECK_MESSAGE(r.ok(), r.describe());
  for (auto& cl : cls) CHECK(on_owner(*cl, set_key, {"ZCARD", set_key}).integer == 1);

  // The freed slot goes to the other client, with a larger token.
  auto c = sem2.try_acquire(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(c.ok(), c.describe());
  CHECK(c.permit.slot() == a.permit.slot());
  CHECK(c.permit.token().value > a.permit.token().value);
  CHECK(b.permit.release(redsync::context::timeout(10s)).ok());
  CHECK(c.permit.release(redsync::context::timeout(10s)).ok());
  for (auto& cl : cls) CHECK(on_owner(*cl, set_key, {"ZCARD", set_key}).integer == 0);
}

TEST_CASE("a semaphore over a mixed set keeps standalone keys on standalone nodes") {
  redis_cluster cl(cluster_config{.masters = 3});
  redsync::test::cluster standalone(2);
  redsync::Redsync rs({cl.uri(), standalone[0].uri(), standalone[1].uri()}, fresh_nodes());
  const std::string name = unique_name("mixed-sem");
  auto sem = rs.new_semaphore(name, 1, {.expiry = 5s});
  auto a = sem.try_acquire(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(a.ok(), a.describe());
  for (const auto& n : a.outcome.nodes) CHECK(n.status == redsync::node_status::ok);
  const std::string cluster_set = "redsync:sem:" + cluster_lock_key(name);
  CHECK(on_owner(cl, cluster_set, {"ZCARD", cluster_set}).integer == 1);
  for (std::size_t i = 0; i < 2; ++i)
    CHECK(redis_client(standalone[i]).command({"ZCARD", "redsync:sem:{" + name + "}"}).integer == 1);
  CHECK(sem.try_acquire(redsync::context::timeout(10s)).outcome.error == redsync::errc::busy);
  CHECK(a.permit.release(redsync::context::timeout(10s)).ok());
  CHECK(on_owner(cl, cluster_set, {"ZCARD", cluster_set}).integer == 0);
}

TEST_CASE(
    "a semaphore's waiter over three cluster members is woken by a release, long before its retry delay") {
  std::vector<std::unique_ptr<redis_cluster>> cls;
  for (int i = 0; i < 3; ++i) cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3}));
  const std::vector<std::string> uris{cls[0]->uri(), cls[1]->uri(), cls[2]->uri()};
  redsync::Redsync holder_rs(uris, fresh_nodes());
  redsync::Redsync waiter_rs(uris, fresh_nodes());
  const std::string name = unique_name("cluster-sem-wake");
  auto holder = holder_rs.new_semaphore(name, 1, {.expiry = 30s});
  auto held = holder.try_acquire(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(held.ok(), held.describe());
  // Its only other chance is a retry 20 s later: acquiring within 8 s of
  // the release takes the SPUBLISH heard by its SSUBSCRIBE.
  auto waiter = waiter_rs.new_semaphore(
      name, 1,
      {.expiry = 30s, .tries = 3, .retry_delay = [](int) { return 20000ms; }, .timeout_factor = 0.5});
  auto waited = waiter.acquire_future(redsync::context::timeout(60s));
  // Subscribed to its own channel (the name's, ':', the SHA1 of its value)
  // on the master that serves the name's slot, on every member.
  const std::string channel = redsync::detail::semaphore_channel(cluster_lock_key(name));
  REQUIRE(redsync::test::wait_until(
      [&] {
        for (auto& cl : cls) {
          auto r = redis_client((*cl)[cl->owner(key_slot(channel))])
                       .command({"PUBSUB", "SHARDCHANNELS", channel + ":*"});
          if (r.elements.size() != 1) return false;
        }
        return true;
      },
      10s));
  REQUIRE(held.permit.release(redsync::context::timeout(10s)).ok());
  REQUIRE(waited.wait_for(8s) == std::future_status::ready);
  auto got = waited.get();
  REQUIRE_MESSAGE(got.ok(), got.describe());
  CHECK(got.permit.token().value > held.permit.token().value);
  CHECK(got.permit.release(redsync::context::timeout(10s)).ok());
}

TEST_SUITE_END();
