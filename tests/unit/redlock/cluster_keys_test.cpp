#include "redlock/cluster_keys.hpp"
#include "redlock/scripts.hpp"
#include "util/cluster_slot.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace redsync::detail;

TEST_CASE("standalone key names do not change") {
  CHECK(line_key("orders") == "orders:redsync-line");
  CHECK(lease_key("orders") == "orders:redsync-leases");
  CHECK(release_channel("orders") == "redsync:release:orders");
  CHECK(record_key == "redsync:node");
}

TEST_CASE("on a cluster member every key of a name shares the name's slot") {
  for (const std::string name : {"orders", "orders:{42}", "a{}b", "x}y", "{", "}", "{}", "é{ü}", ""}) {
    CAPTURE(name);
    const std::string key = cluster_lock_key(name);
    const std::uint16_t slot = cluster_name_slot(name);
    CHECK(key_slot(key) == slot);
    CHECK(key_slot(line_key(key)) == slot);
    CHECK(key_slot(lease_key(key)) == slot);
    CHECK(key_slot(release_channel(key)) == slot);
    CHECK(key_slot(cluster_record_key(slot)) == slot);
  }
  CHECK(cluster_lock_key("orders") == "{orders}");
  CHECK(cluster_lock_key("orders:{42}") == "orders:{42}");  // a name with a tag keeps it
  CHECK(cluster_lock_key("}x") == "{~}}x");                 // "{}x}" would have no tag
  CHECK(cluster_record_key(key_slot("foo")) ==
        "redsync:node:{" + std::string(slot_tag(key_slot("foo"))) + "}");
}

TEST_CASE("a lock's names are grouped by slot, groups in ascending slot order") {
  const std::vector<std::string> names = {"b{t}", "zz", "a{t}", "{zz}x"};
  const auto groups = group_by_slot(names);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].slot < groups[1].slot);
  for (const auto& g : groups) {
    for (const auto& n : g.names) CHECK(cluster_name_slot(n) == g.slot);
  }
  const auto& t = groups[0].slot == key_slot("t") ? groups[0] : groups[1];
  CHECK(t.names == std::vector<std::string>{"b{t}", "a{t}"});
}
