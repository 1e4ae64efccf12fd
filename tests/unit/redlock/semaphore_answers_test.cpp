// What the semaphore's acquire answers mean (lib/redlock/scripts/semaphore_scripts.hpp),
// without a server; the scripts themselves are driven in
// tests/redis/redlock/semaphore_test.cpp.

#include "redlock/scripts/semaphore_scripts.hpp"

#include <doctest/doctest.h>

#include <vector>

using redsync::node_status;
using redsync::detail::classify_semaphore_acquire;
using redsync::detail::permit_member;
using redsync::detail::read_semaphore_answer;
using redsync::detail::reply;
using redsync::detail::semaphore_held_as_mutex;
using redsync::detail::semaphore_permits_key;
using redsync::detail::semaphore_set_key;

namespace {

reply integer(long long v) {
  reply r;
  r.type = reply::kind::integer;
  r.integer = v;
  return r;
}
reply text(const char* s) {
  reply r;
  r.type = reply::kind::string;
  r.str = s;
  return r;
}
reply array(std::vector<reply> elements) {
  reply r;
  r.type = reply::kind::array;
  r.elements = std::move(elements);
  return r;
}

}  // namespace

TEST_CASE("a grant is ok and lists the other permits' slots") {
  const reply grant = array({integer(42), text("run"), integer(-1), integer(8000), text("0,3")});
  CHECK(classify_semaphore_acquire(grant) == node_status::ok);
  const auto a = read_semaphore_answer(grant);
  REQUIRE(a);
  CHECK(a->others == std::vector<std::uint32_t>{0, 3});
  CHECK_FALSE(a->stored_permits);
}

TEST_CASE("a refusal is taken and lists the live slots; an empty list is no slot") {
  const reply full = array({integer(-1), text("1,0"), integer(0)});
  CHECK(classify_semaphore_acquire(full) == node_status::taken);
  CHECK(read_semaphore_answer(full)->others == std::vector<std::uint32_t>{1, 0});
  CHECK(read_semaphore_answer(array({integer(-1), text(""), integer(0)}))->others.empty());
}

TEST_CASE("a refusal says whether a permit was free for the caller there (only its slot refused)") {
  CHECK_FALSE(read_semaphore_answer(array({integer(-1), text("0"), integer(0)}))->open);
  CHECK(read_semaphore_answer(array({integer(-1), text("0"), integer(1)}))->open);
  CHECK(read_semaphore_answer(array({integer(42), text("run"), integer(-1), integer(8000), text("")}))->open);
  // The answer of a version without the line: not an answer of ours.
  CHECK(classify_semaphore_acquire(array({integer(-1), text("0")})) == node_status::reply_error);
}

TEST_CASE("a mismatch carries the stored number of permits") {
  const reply mismatch = array({integer(-2), integer(3)});
  const auto a = read_semaphore_answer(mismatch);
  REQUIRE(a);
  REQUIRE(a->stored_permits);
  CHECK(*a->stored_permits == 3);
  CHECK(classify_semaphore_acquire(mismatch) == node_status::reply_error);
}

TEST_CASE("a refusal because the name is held as a mutex is taken, says so, and lists no slot") {
  const reply held = array({integer(-3)});
  CHECK(classify_semaphore_acquire(held) == node_status::taken);
  CHECK(semaphore_held_as_mutex(held));
  const auto a = read_semaphore_answer(held);
  REQUIRE(a);
  CHECK(a->held_as_mutex);
  CHECK(a->others.empty());
  CHECK_FALSE(a->stored_permits);
  CHECK_FALSE(read_semaphore_answer(array({integer(-1), text("0"), integer(0)}))->held_as_mutex);
  CHECK_FALSE(semaphore_held_as_mutex(array({integer(-1), text("0"), integer(0)})));
  CHECK_FALSE(semaphore_held_as_mutex(array({integer(-3), text("")})));
  CHECK_FALSE(semaphore_held_as_mutex(integer(-3)));
}

TEST_CASE("anything else is a reply error and no answer") {
  for (const reply& r :
       {integer(1), text("OK"), array({}), array({integer(0), text("")}), array({integer(5), text("run")}),
        array({integer(-1), integer(2)}), array({integer(-1), text("0"), text("1")})}) {
    CHECK(classify_semaphore_acquire(r) == node_status::reply_error);
    CHECK_FALSE(read_semaphore_answer(r));
  }
}

TEST_CASE("every key of a semaphore is in the hash tag of its name, and a member names its slot") {
  CHECK(semaphore_set_key("jobs") == "redsync:sem:{jobs}");
  CHECK(semaphore_permits_key("jobs") == "redsync:sem:{jobs}:permits");
  CHECK(semaphore_line_key(semaphore_set_key("jobs")) == "redsync:sem:{jobs}:line");
  CHECK(semaphore_leases_key(semaphore_set_key("jobs")) == "redsync:sem:{jobs}:leases");
  CHECK(permit_member(3, "abc") == "3:abc");
}
