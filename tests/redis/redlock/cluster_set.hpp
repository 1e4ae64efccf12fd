// Test helpers: a lock set made of whole local Redis Clusters, and what a
// key holds on the master that serves its slot.
#pragma once

#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "wait.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "util/cluster_slot.hpp"

namespace redsync::test {

/// `n` independent clusters of three masters each.
inline std::vector<std::unique_ptr<redis_cluster>> three_master_clusters(std::size_t n) {
  std::vector<std::unique_ptr<redis_cluster>> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 3}));
  return out;
}

/// The value of `key` on the master of its slot in `cl` ("" when absent).
inline std::string value_on(redis_cluster& cl, const std::string& key) {
  redis_client c(cl[cl.owner(redsync::detail::key_slot(key))]);
  return c.get(key).value_or("");
}

/// Fails master `master` of `cl` (three masters with one replica each: its
/// replica is node master + 3) over to its replica once the replica has the
/// master's writes (WAIT, 5 s), and waits (20 s at most) until the replica
/// reports the master role. Returns the replica's index.
inline std::size_t fail_over_to_replica(redis_cluster& cl, std::size_t master) {
  const std::size_t replica = master + 3;
  redis_client old_master(cl[master]);
  REQUIRE(old_master.command({"WAIT", "1", "5000"}).integer == 1);
  redis_client promoted(cl[replica]);
  REQUIRE(promoted.command({"CLUSTER", "FAILOVER"}).str == "OK");
  REQUIRE(wait_until([&] { return promoted.info_field("replication", "role") == "master"; },
                     std::chrono::seconds(20)));
  return replica;
}

/// `n` names that start with `base`, each in a slot of its own.
inline std::vector<std::string> names_in_distinct_slots(const std::string& base, std::size_t n) {
  std::vector<std::string> out;
  std::set<std::uint16_t> slots;
  for (int i = 0; out.size() < n; ++i) {
    std::string name = base + ":" + std::to_string(i);
    if (slots.insert(redsync::detail::cluster_name_slot(name)).second) out.push_back(std::move(name));
  }
  return out;
}

}  // namespace redsync::test
