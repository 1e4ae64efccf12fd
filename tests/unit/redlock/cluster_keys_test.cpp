#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/embedded_lua.hpp"
#include "redlock/scripts/lock_keys.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "redlock/scripts/server_mark.hpp"
#include "util/cluster_slot.hpp"

#include <redsync/error.hpp>

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

TEST_CASE("on a cluster member a semaphore's keys share the slot of the name's lock key, where its mark is") {
  // Rule X (semaphore_scripts.hpp): the semaphore's scripts read and write
  // the lock key in the same call as the set, so all must be in one slot.
  for (const std::string name : {"jobs", "orders:{42}", "a{}b", "x}y", "{", "}", "{}", "}x", "é{ü}", ""}) {
    CAPTURE(name);
    const std::string set = cluster_semaphore_set_key(name);
    CHECK(key_slot(set) == key_slot(cluster_lock_key(name)));
    CHECK(key_slot(set + ":permits") == cluster_name_slot(name));
    CHECK(key_slot(cluster_lock_key(name)) == cluster_name_slot(name));
  }
  CHECK(cluster_semaphore_set_key("jobs") == "redsync:sem:{jobs}");
  CHECK(cluster_semaphore_set_key("orders:{42}") == "redsync:sem:orders:{42}");
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

TEST_CASE("a lock's keys on a standalone member are today's, on a cluster member all in the name's slot") {
  const std::vector<std::string> names{"orders"};
  const lock_keys plain(names, false);
  CHECK(plain.names == names);
  CHECK(plain.record == "redsync:node");
  CHECK(plain.acquire_keys == std::vector<std::string_view>{"orders", "redsync:node", "orders:redsync-line",
                                                            "orders:redsync-leases"});
  CHECK(plain.release_keys ==
        std::vector<std::string_view>{"orders", "orders:redsync-line", "orders:redsync-leases"});
  CHECK(plain.channels == std::vector<std::string>{"redsync:release:orders"});
  CHECK(plain.fence_keys == std::vector<std::string_view>{"orders", "redsync:node"});

  const lock_keys cluster(names, true);
  const std::uint16_t slot = cluster_name_slot("orders");
  CHECK(cluster.record == cluster_record_key(slot));
  CHECK(cluster.server_mark == cluster_server_mark_key(slot));
  CHECK(cluster.acquire_keys ==
        std::vector<std::string_view>{"{orders}", cluster.record, "{orders}:redsync-line",
                                      "{orders}:redsync-leases", cluster.server_mark});
  CHECK(cluster.channels == std::vector<std::string>{"redsync:release:{orders}"});
  for (const auto key : cluster.acquire_keys) CHECK(key_slot(key) == slot);
  for (const auto& c : cluster.channels) CHECK(key_slot(c) == slot);
}

TEST_CASE("a multi-name lock over cluster members has one key group per slot, in slot order") {
  const cluster_layout one = make_cluster_layout({"{o}:1", "{o}:2"});
  REQUIRE(one.groups.size() == 1);
  CHECK(one.slots == std::vector<std::uint16_t>{cluster_name_slot("o")});
  CHECK(one.groups[0]->acquire_keys ==
        std::vector<std::string_view>{"{o}:1", "{o}:2", cluster_record_key(key_slot("o")),
                                      "{o}:1:redsync-line", "{o}:2:redsync-line", "{o}:1:redsync-leases",
                                      "{o}:2:redsync-leases", cluster_server_mark_key(key_slot("o"))});
  // "a" and "c" share no slot with "b"; the groups follow the slots.
  const std::vector<std::string> names{"a", "b", "{a}:2"};
  const cluster_layout split = make_cluster_layout(names);
  REQUIRE(split.groups.size() == 2);
  CHECK(split.slots[0] < split.slots[1]);
  for (std::size_t g = 0; g < 2; ++g) {
    CHECK(split.groups[g]->record == cluster_record_key(split.slots[g]));
    for (const auto key : split.groups[g]->acquire_keys) CHECK(key_slot(key) == split.slots[g]);
  }
  const std::size_t a = cluster_name_slot("a") < cluster_name_slot("b") ? 0 : 1;
  CHECK(split.groups[a]->names == std::vector<std::string>{"{a}", "{a}:2"});
  CHECK(split.groups[1 - a]->names == std::vector<std::string>{"{b}"});
}

TEST_CASE("a call over names in several slots has one cluster form per group and today's standalone bytes") {
  const std::vector<std::string> names{"a", "b"};
  const lock_keys plain(names, false);
  const cluster_layout split = make_cluster_layout(names);
  const std::vector<std::unique_ptr<const lock_keys>> none;
  const script_call only =
      make_lock_call(release_script(), plain, none, &lock_keys::release_keys, {"v", "0"}, true);
  const script_call per_group =
      make_lock_call(release_script(), plain, split.groups, &lock_keys::release_keys, {"v", "0"}, true);
  CHECK(*per_group.evalsha == *only.evalsha);
  CHECK_FALSE(per_group.cluster_evalsha);
  REQUIRE(per_group.cluster_groups.size() == 2);
  for (std::size_t g = 0; g < 2; ++g) {
    const std::string& c = *per_group.for_group(g).evalsha;
    const std::string& mine = split.groups[g]->names.front();
    const std::string& other = split.groups[1 - g]->names.front();
    CHECK(c.find(mine + ":redsync-line") != std::string::npos);
    CHECK(c.find(other) == std::string::npos);
  }
}

TEST_CASE("a call is encoded once per kind of member") {
  const std::vector<std::string> names{"orders"};
  const lock_keys plain(names, false);
  const cluster_layout cluster = make_cluster_layout(names);
  const script_call only =
      make_lock_call(release_script(), plain, {}, &lock_keys::release_keys, {"v", "0"}, true);
  CHECK_FALSE(only.cluster_evalsha);
  CHECK(only.for_member(true).evalsha == only.evalsha);
  const script_call both =
      make_lock_call(release_script(), plain, cluster.groups, &lock_keys::release_keys, {"v", "0"}, true);
  CHECK(*both.evalsha == *only.evalsha);  // standalone members get exactly today's bytes
  REQUIRE(both.cluster_evalsha);
  const std::string& c = *both.for_member(true).evalsha;
  CHECK(c.find("{orders}:redsync-line") != std::string::npos);
  CHECK(c.find("redsync:release:{orders}") != std::string::npos);
  // The cluster variant of the script (SPUBLISH), not the standalone one.
  REQUIRE(release_script().cluster != nullptr);
  CHECK(c.find(release_script().cluster->sha1) != std::string::npos);
  CHECK(c.find(release_script().sha1) == std::string::npos);
  CHECK(both.for_member(true).script == release_script().cluster);
  CHECK(both.for_member(false).evalsha == both.evalsha);
  CHECK(both.for_member(false).script == &release_script());
}

TEST_CASE(
    "the standalone scripts keep their SHA1s; a cluster variant differs only in SPUBLISH, and the "
    "acquisition's also in the server mark") {
  // Pinned: deployed clients share these scripts' cache entries, and a
  // standalone member must run exactly what it ran before cluster members.
  // (Changed on purpose in issue 34: the wake-up goes to the waiter's own
  // channel; and the acquisition in issue 36: a name held as a semaphore
  // refuses it, rule X of semaphore_scripts.hpp; then the node record's
  // part of a grant became a piece every acquisition shares,
  // lua/grant_record.lua; and leaving the line, which wakes the readers
  // of an RWMutex that a leaving writer stood in front of.)
  CHECK(acquire_script().sha1 == "d9225e0efb931759653c9cd485ea0f5607855551");
  CHECK(leave_script().sha1 == "9267b966db289374a9a9025b9e40ad667d84a70e");
  CHECK(release_script().sha1 == "89dac2fc00d2dac377d7118d5db17f1436d403cf");
  const auto replaced = [](std::string s, const std::string& what, const std::string& with) {
    const auto at = s.find(what);
    REQUIRE(at != std::string::npos);
    CHECK(s.find(what, at + 1) == std::string::npos);  // once
    return s.replace(at, what.size(), with);
  };
  for (const lua_script* s : {&acquire_script(), &leave_script(), &release_script()}) {
    REQUIRE(s->cluster != nullptr);
    CHECK(s->cluster->cluster == nullptr);
    std::string expected =
        replaced(std::string(s->source), "redis.call('PUBLISH', ", "redis.call('SPUBLISH', ");
    // Leaving also wakes an RWMutex's readers (lua/rw_wake.lua).
    if (s == &leave_script())
      expected = replaced(expected, "redis.call(\"PUBLISH\", ", "redis.call(\"SPUBLISH\", ");
    if (s == &acquire_script()) {
      // The mark's key is the last KEY; the mark goes last in the yes.
      expected = replaced(expected, "local n = (#KEYS - 1) / 3", "local n = (#KEYS - 2) / 3");
      const std::string yes = "return {token, run, age, window, in_line}";
      expected = replaced(expected, yes, "return vote({token, run, age, window, in_line})");
      const auto body = expected.find("\nlocal record = KEYS[n + 1]");
      REQUIRE(body != std::string::npos);
      expected.insert(body, std::string(lua::piece::mark_vote));
    }
    CHECK(std::string(s->cluster->source) == expected);
    CHECK(s->cluster->sha1 != s->sha1);
  }
  // Scripts that publish nothing run as they are on every member.
  CHECK(extend_script().cluster == nullptr);
  CHECK(check_script().cluster == nullptr);
  CHECK(fence_script().cluster == nullptr);
}
