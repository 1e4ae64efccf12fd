// The local Redis Cluster fixture itself: it forms, serves every slot from
// the master it says, and its resharding steps move a slot.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "redis_client.hpp"
#include "redis_cluster.hpp"

using namespace std::chrono_literals;
using namespace redsync::test;
using kind = redis_client::reply::kind;

namespace {

long long slot_of(redis_client& c, const std::string& key) {
  return c.command({"CLUSTER", "KEYSLOT", key}).integer;
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

TEST_CASE(
    "a 3-master cluster forms with every slot served, and each key is accepted only by its slot's master") {
  redis_cluster cl;
  REQUIRE(cl.size() == 3);
  CHECK(cl.uri().starts_with("redis+cluster://127.0.0.1:"));
  redis_client c0(cl[0]);
  CHECK(c0.command({"CLUSTER", "INFO"}).str.find("cluster_slots_assigned:16384") != std::string::npos);
  for (const std::string key : {"harness:a", "harness:b", "harness:c", "harness:d"}) {
    const auto slot = static_cast<std::uint16_t>(slot_of(c0, key));
    const std::size_t owner = cl.owner(slot);
    CHECK(owner == slot * 3 / 16384);
    for (std::size_t i = 0; i < cl.size(); ++i) {
      redis_client c(cl[i]);
      const auto r = c.command({"SET", key, "v"});
      if (i == owner) {
        CHECK(r.str == "OK");
      } else {
        CHECK(r.type == kind::error);
        CHECK(r.str.starts_with("MOVED " + std::to_string(slot) + " "));
      }
    }
  }
}

TEST_CASE("the resharding steps move a slot and its keys to another master") {
  redis_cluster cl;
  redis_client c0(cl[0]);
  const std::string key = "harness:moving";
  const auto slot = static_cast<std::uint16_t>(slot_of(c0, key));
  const std::size_t from = cl.owner(slot);
  const std::size_t to = (from + 1) % 3;
  redis_client src(cl[from]);
  REQUIRE(src.command({"SET", key, "v"}).str == "OK");
  cl.begin_migration(slot, from, to);
  cl.migrate_keys(slot, from, to);
  CHECK(src.command({"GET", key}).str.starts_with("ASK "));
  cl.finish_migration(slot, to);
  CHECK(cl.owner(slot, to) == to);
  redis_client dst(cl[to]);
  CHECK(dst.get(key) == "v");
  CHECK(cl.wait_ok(10s));
}

TEST_CASE("a cluster with a replica per master syncs its replicas") {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  REQUIRE(cl.size() == 6);
  for (std::size_t i = 3; i < 6; ++i) {
    redis_client c(cl[i]);
    CHECK(c.info_field("replication", "role") == "slave");
    CHECK(c.info_field("replication", "master_port") == std::to_string(cl[i - 3].port()));
  }
}

TEST_SUITE_END();
