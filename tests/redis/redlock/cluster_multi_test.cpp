// Multi-name locks whose names span several slots of cluster members
// (docs/cluster.md, "Multi-name locks"): one call per slot group per member,
// each member all-or-nothing, tokens per slot. Against real local clusters
// (and a mixed set); the keys are checked on the master of their slot.
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
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using redsync::detail::key_slot;
using namespace redsync::test;

namespace {

std::vector<std::string> uris(const std::vector<std::unique_ptr<redis_cluster>>& cls) {
  std::vector<std::string> out;
  for (const auto& c : cls) out.push_back(c->uri());
  return out;
}

// A client of the master that serves `key`'s slot in `cl`.
redis_client client_for(redis_cluster& cl, const std::string& key) {
  return redis_client(cl[cl.owner(key_slot(key))]);
}

// Every key whose name contains `base`, on every master of `cl`.
std::set<std::string> keys_with(redis_cluster& cl, const std::string& base) {
  std::set<std::string> out;
  for (std::size_t m = 0; m < 3; ++m) {
    redis_client c(cl[m]);
    for (const auto& k : c.command({"KEYS", "*" + base + "*"}).elements) out.insert(k.str);
  }
  return out;
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

TEST_CASE(
    "a multi-name lock over three slots on three cluster members excludes every lock sharing a name, and "
    "its extend and unlock reach every group") {
  auto cls = three_master_clusters(3);
  redsync::Redsync rs(uris(cls), fresh_nodes());
  const auto names = names_in_distinct_slots(unique_name("multi"), 4);
  const std::vector<std::string> mine{names[0], names[1], names[2]};
  auto m = rs.new_multi_mutex(mine, {.expiry = 3s});
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  for (const auto& n : r.nodes) CHECK(n.status == redsync::node_status::ok);
  for (auto& cl : cls)
    for (const auto& n : mine) CHECK(value_on(*cl, cluster_lock_key(n)) == m.value());

  redsync::Redsync other(uris(cls), fresh_nodes());
  for (const auto& n : mine) {
    auto single = other.new_mutex(n, {.expiry = 3s});
    CHECK(single.try_lock(redsync::context::timeout(10s)).error == redsync::errc::busy);
  }
  // Its expiry outlasts the wait below: only the undo clears what it won.
  auto sharing = other.new_multi_mutex(std::vector<std::string>{names[2], names[3]}, {.expiry = 30s});
  CHECK(sharing.try_lock(redsync::context::timeout(10s)).error == redsync::errc::busy);
  // Nothing of the refused attempt is left: the name it did not share is
  // free on every member.
  for (auto& cl : cls)
    CHECK(wait_until([&] { return value_on(*cl, cluster_lock_key(names[3])).empty(); }, 10s));

  std::this_thread::sleep_for(1s);
  auto e = m.extend(redsync::context::timeout(10s));
  CHECK_MESSAGE(e.ok(), e.describe());
  for (auto& cl : cls)
    for (const auto& n : mine) CHECK(client_for(*cl, cluster_lock_key(n)).pttl(cluster_lock_key(n)) > 2200);

  auto u = m.unlock(redsync::context::timeout(10s));
  CHECK_MESSAGE(u.ok(), u.describe());
  for (auto& cl : cls)
    for (const auto& n : mine) CHECK(value_on(*cl, cluster_lock_key(n)).empty());
  auto single = other.new_mutex(names[1], {.expiry = 3s});
  CHECK(single.try_lock(redsync::context::timeout(10s)).ok());
  CHECK(single.unlock(redsync::context::timeout(10s)).ok());
}

TEST_CASE(
    "a multi-name lock over two slots on a mixed set: one call per group on the cluster, one on each node") {
  redis_cluster cl(cluster_config{.masters = 3});
  redsync::test::cluster standalone(2);
  const std::vector<std::string> set{cl.uri(), standalone[0].uri(), standalone[1].uri()};
  redsync::Redsync rs(set, fresh_nodes());
  const auto names = names_in_distinct_slots(unique_name("multi-mixed"), 2);
  auto m = rs.new_multi_mutex(names, {.expiry = 3s});
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  for (const auto& n : r.nodes) CHECK(n.status == redsync::node_status::ok);
  for (const auto& n : names) {
    CHECK(value_on(cl, cluster_lock_key(n)) == m.value());
    for (std::size_t i = 0; i < 2; ++i) CHECK(redis_client(standalone[i]).get(n) == m.value());
  }
  redsync::Redsync other(set, fresh_nodes());
  auto single = other.new_mutex(names[1], {.expiry = 3s});
  CHECK(single.try_lock(redsync::context::timeout(10s)).error == redsync::errc::busy);
  CHECK(m.unlock(redsync::context::timeout(10s)).ok());
  for (const auto& n : names) {
    CHECK(value_on(cl, cluster_lock_key(n)).empty());
    for (std::size_t i = 0; i < 2; ++i) CHECK_FALSE(redis_client(standalone[i]).get(n).has_value());
  }
  CHECK(single.try_lock(redsync::context::timeout(10s)).ok());
  CHECK(single.unlock(redsync::context::timeout(10s)).ok());
}

TEST_CASE("a cluster member where one group is held by another votes no and keeps none of its other groups") {
  auto cls = three_master_clusters(3);
  redsync::Redsync rs(uris(cls), fresh_nodes());
  const std::string base = unique_name("multi-partial");
  const auto names = names_in_distinct_slots(base, 3);
  const std::string foreign_key = cluster_lock_key(names[1]);
  // The lock's expiry (30 s) outlasts every wait below (10 s): what it won
  // on a member that votes no goes only by the undo, never by expiry.
  const auto hold_foreign = [&](redis_cluster& cl) {
    REQUIRE(client_for(cl, foreign_key).command({"SET", foreign_key, "someone-else", "PX", "60000"}).str ==
            "OK");
  };

  SUBCASE("one member says no: the lock holds on the two others, nothing of it on the first") {
    hold_foreign(*cls[0]);
    auto m = rs.new_multi_mutex(names, {.expiry = 30s});
    auto r = m.lock(redsync::context::timeout(20s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    REQUIRE(r.nodes.size() == 3);
    CHECK(r.nodes[0].status == redsync::node_status::taken);
    CHECK(r.nodes[1].status == redsync::node_status::ok);
    CHECK(r.nodes[2].status == redsync::node_status::ok);
    // Its other groups (their keys, lines and leases) are undone there.
    const std::set<std::string> left{foreign_key};
    CHECK(wait_until([&] { return keys_with(*cls[0], base) == left; }, 10s));
    for (std::size_t i = 1; i < 3; ++i)
      for (const auto& n : names) CHECK(value_on(*cls[i], cluster_lock_key(n)) == m.value());
    CHECK(m.unlock(redsync::context::timeout(10s)).ok());
    CHECK(value_on(*cls[0], foreign_key) == "someone-else");
  }

  SUBCASE("two members say no: the attempt fails and leaves no key on any member") {
    hold_foreign(*cls[0]);
    hold_foreign(*cls[1]);
    auto m = rs.new_multi_mutex(names, {.expiry = 30s});
    auto r = m.try_lock(redsync::context::timeout(10s));
    CHECK(r.error == redsync::errc::busy);
    const std::set<std::string> left{foreign_key};
    CHECK(wait_until([&] { return keys_with(*cls[0], base) == left; }, 10s));
    CHECK(wait_until([&] { return keys_with(*cls[1], base) == left; }, 10s));
    CHECK(wait_until([&] { return keys_with(*cls[2], base).empty(); }, 10s));
  }
}

TEST_CASE("fencing tokens increase across locks that share a slot, through every group's record") {
  auto cls = three_master_clusters(3);
  redsync::Redsync rs(uris(cls), fresh_nodes());
  const auto names = names_in_distinct_slots(unique_name("multi-token"), 3);
  const auto take = [&](const std::vector<std::string>& ns) {
    auto m = rs.new_multi_mutex(ns, {.expiry = 3s});
    auto r = m.lock(redsync::context::timeout(20s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    const auto t = m.token().value;
    REQUIRE(m.unlock(redsync::context::timeout(10s)).ok());
    return t;
  };
  // The first name's slot counts ahead of the second's on every member.
  std::uint64_t last = 0;
  for (int i = 0; i < 4; ++i) {
    const auto t = take({names[0]});
    CHECK(t > last);
    last = t;
  }
  const auto both = take({names[0], names[1]});
  CHECK(both > last);
  // The write-back raised the second name's records to the token: a lock
  // of that name alone comes after it.
  const auto second = take({names[1]});
  CHECK(second > both);
  const auto pair = take({names[1], names[2]});
  CHECK(pair > second);
  CHECK(take({names[2]}) > pair);
}

TEST_CASE("an extension of a multi-name lock fails once one group is gone on a quorum of cluster members") {
  auto cls = three_master_clusters(3);
  redsync::Redsync rs(uris(cls), fresh_nodes());
  const auto names = names_in_distinct_slots(unique_name("multi-gone"), 2);
  auto m = rs.new_multi_mutex(names, {.expiry = 5s});
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  const std::string gone = cluster_lock_key(names[1]);
  for (std::size_t i = 0; i < 2; ++i) REQUIRE(client_for(*cls[i], gone).command({"DEL", gone}).integer == 1);
  auto e = m.extend(redsync::context::timeout(10s));
  CHECK(e.error == redsync::errc::expired);
  REQUIRE(e.nodes.size() == 3);
  CHECK(e.nodes[0].status == redsync::node_status::missing);
  CHECK(e.nodes[2].status == redsync::node_status::ok);
  CHECK(m.unlock(redsync::context::timeout(10s)).error != redsync::errc{});
  for (auto& cl : cls) CHECK(value_on(*cl, cluster_lock_key(names[0])).empty());
}

TEST_CASE(
    "auto-extension keeps every group of a multi-name lock over cluster members alive past its expiry") {
  auto cls = three_master_clusters(3);
  redsync::Redsync rs(uris(cls), fresh_nodes());
  const auto names = names_in_distinct_slots(unique_name("multi-auto"), 3);
  // 1.5 s: a member's extension (its command timeout a twentieth of the
  // expiry) must not miss a whole expiry on a loaded machine; with 600 ms
  // one member's keys expired under ASan beside a chaos run.
  auto m = rs.new_multi_mutex(names, {.expiry = 1500ms, .auto_extend = true});
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  std::this_thread::sleep_for(4000ms);  // past two expiries
  CHECK(m.held());
  for (auto& cl : cls)
    for (const auto& n : names) CHECK(value_on(*cl, cluster_lock_key(n)) == m.value());
  CHECK(m.unlock(redsync::context::timeout(10s)).ok());
  for (auto& cl : cls)
    for (const auto& n : names) CHECK(value_on(*cl, cluster_lock_key(n)).empty());
}

TEST_CASE(
    "the watchdog reports a multi-name lock lost once one group is gone on a quorum of cluster members") {
  auto cls = three_master_clusters(3);
  redsync::Redsync rs(uris(cls), fresh_nodes());
  const auto names = names_in_distinct_slots(unique_name("multi-lost"), 2);
  auto m = rs.new_multi_mutex(names, {.expiry = 1s, .auto_extend = true});
  auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  CHECK_FALSE(m.lost());
  const std::string gone = cluster_lock_key(names[1]);
  for (std::size_t i = 0; i < 2; ++i) REQUIRE(client_for(*cls[i], gone).command({"DEL", gone}).integer == 1);
  CHECK(wait_until([&] { return m.lost(); }, 10s));
  CHECK_FALSE(m.held());
  (void)m.unlock(redsync::context::timeout(10s));
  for (auto& cl : cls) CHECK(value_on(*cl, cluster_lock_key(names[0])).empty());
}

TEST_SUITE_END();

TEST_CASE("a multi-name lock naming `a` and `{a}` is refused over a cluster member, where they are one key") {
  redis_cluster cl(cluster_config{.masters = 3});
  redsync::test::redis_server standalone;
  const std::string name = unique_name("dup");
  const std::string tagged = "{" + name + "}";
  REQUIRE(cluster_lock_key(name) == cluster_lock_key(tagged));

  redsync::Redsync over_cluster({cl.uri()}, fresh_nodes());
  const std::string says = "\"" + tagged + "\" are the same key";
  CHECK_THROWS_WITH_AS((void)over_cluster.new_multi_mutex({name, tagged}), doctest::Contains(says.c_str()),
                       redsync::config_error);

  // On standalone members they are two keys, and the lock takes both.
  redsync::Redsync over_standalone({standalone.uri()}, fresh_nodes());
  auto m = over_standalone.new_multi_mutex({name, tagged});
  m.lock();
  redis_client c(standalone);
  CHECK(c.get(name).has_value());
  CHECK(c.get(tagged).has_value());
  m.unlock();
}
