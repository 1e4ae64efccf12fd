// Telling a failover from a migration in a cluster member's slot maps
// (lib/transport/master_changes.hpp), without servers.
#include "transport/master_changes.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

using redsync::detail::master_changes;
using redsync::detail::slot_map;

namespace {

// A map whose masters (127.0.0.1:port) serve the ranges given.
slot_map map_of(const std::vector<std::pair<int, std::pair<int, int>>>& ranges) {
  slot_map m;
  for (const auto& [port, range] : ranges) {
    const std::size_t k = m.master_at("127.0.0.1", port);
    m.masters[k].slots.emplace_back(range.first, range.second);
    for (int s = range.first; s <= range.second; ++s)
      m.owner[static_cast<std::size_t>(s)] = static_cast<std::int32_t>(k);
  }
  return m;
}

using changes = std::vector<std::pair<std::string, std::string>>;

}  // namespace

TEST_CASE("a promoted replica in place of a master that is gone is a failover; the first map shows none") {
  master_changes w;
  CHECK(w.adopt(map_of({{7000, {0, 8191}}, {7001, {8192, 16383}}})).empty());
  CHECK(w.masters() == std::vector<std::string>{"127.0.0.1:7000", "127.0.0.1:7001"});
  CHECK(w.adopt(map_of({{7003, {0, 8191}}, {7001, {8192, 16383}}})) ==
        changes{{"127.0.0.1:7000", "127.0.0.1:7003"}});
  // The same map again shows nothing new.
  CHECK(w.adopt(map_of({{7003, {0, 8191}}, {7001, {8192, 16383}}})).empty());
}

TEST_CASE("a failover is seen across a map read in which the dead master's slots had no master") {
  master_changes w;
  (void)w.adopt(map_of({{7000, {0, 8191}}, {7001, {8192, 16383}}}));
  CHECK(w.adopt(map_of({{7001, {8192, 16383}}})).empty());
  CHECK(w.adopt(map_of({{7003, {0, 8191}}, {7001, {8192, 16383}}})) ==
        changes{{"127.0.0.1:7000", "127.0.0.1:7003"}});
}

TEST_CASE("slots moved between masters that stay masters are a migration, not a failover") {
  master_changes w;
  (void)w.adopt(map_of({{7000, {0, 8191}}, {7001, {8192, 16383}}}));
  CHECK(w.adopt(map_of({{7000, {0, 8190}}, {7001, {8191, 16383}}})).empty());
  // Every slot of 7000 moved to 7001, a master already: still no failover.
  CHECK(w.adopt(map_of({{7001, {0, 16383}}})).empty());
}

TEST_CASE("masters that left long ago are forgotten, and the last master of unserved slots is not") {
  master_changes w;
  (void)w.adopt(map_of({{7000, {0, 8191}}, {7001, {8192, 16383}}}));
  // 7001 dies and its slots stay unserved while the other shard fails over
  // to a new address 300 times (pods with new IPs): each failover is seen,
  // and only the current master and 7001 are kept.
  int last = 7000;
  for (int port = 8000; port < 8300; ++port) {
    CHECK(w.adopt(map_of({{port, {0, 8191}}})) ==
          changes{{"127.0.0.1:" + std::to_string(last), "127.0.0.1:" + std::to_string(port)}});
    CHECK(w.known() == 2);
    last = port;
  }
  // 7001's replica is promoted at last: a failover from 7001.
  CHECK(w.adopt(map_of({{last, {0, 8191}}, {7003, {8192, 16383}}})) ==
        changes{{"127.0.0.1:7001", "127.0.0.1:7003"}});
  CHECK(w.known() == 2);
}
