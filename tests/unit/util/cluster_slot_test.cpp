#include "util/cluster_slot.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

using namespace redsync::detail;

// Reference values from the Redis Cluster specification (crc16 of
// "123456789" is 0x31C3) and from CLUSTER KEYSLOT on a 7.0 server.
TEST_CASE("crc16 and key_slot agree with Redis") {
  CHECK(crc16("123456789") == 0x31C3);
  CHECK(key_slot("foo") == 12182);
  CHECK(key_slot("bar") == 5061);
  CHECK(key_slot("") == 0);
}

TEST_CASE("the hash tag is the text between the first '{' and the next '}', when not empty") {
  CHECK(hash_tag("{user1000}.following") == "user1000");
  CHECK(key_slot("{user1000}.following") == key_slot("{user1000}.followers"));
  CHECK(hash_tag("foo{}{bar}") == "foo{}{bar}");  // empty first tag: the whole key
  CHECK(hash_tag("foo{{bar}}zap") == "{bar");
  CHECK(hash_tag("foo{bar}{zap}") == "bar");
  CHECK(hash_tag("a{b") == "a{b");
  CHECK(has_hash_tag("x{y}"));
  CHECK_FALSE(has_hash_tag("x{}y"));
  CHECK_FALSE(has_hash_tag("plain"));
}

TEST_CASE("every slot has a tag of at most 4 characters that maps to it") {
  for (std::uint32_t s = 0; s < cluster_slots; ++s) {
    const std::string_view tag = slot_tag(static_cast<std::uint16_t>(s));
    REQUIRE(!tag.empty());
    REQUIRE(tag.size() <= 4);
    REQUIRE(key_slot(tag) == s);
    REQUIRE(key_slot("redsync:node:{" + std::string(tag) + "}") == s);
  }
  CHECK_THROWS(slot_tag(cluster_slots));
}
