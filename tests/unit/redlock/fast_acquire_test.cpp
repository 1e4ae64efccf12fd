// The acquisition transaction (lib/redlock/scripts/fast_acquire.hpp): what goes on
// the wire, and EXEC's answer read back in the acquire script's shape.
#include <doctest/doctest.h>

#include "redlock/scripts/fast_acquire.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "transport/resp.hpp"

#include <string>
#include <vector>

using namespace redsync::detail;
using redsync::node_status;

namespace {

reply parse_wire(const std::string& wire) {
  resp_reader reader;
  REQUIRE(reader.feed(wire.data(), wire.size()));
  reply r;
  REQUIRE(reader.next(r) == resp_reader::status::reply);
  return r;
}

std::string bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}

// EXEC's answer: SET's, HINCRBY's, HMGET's (run, since, window) and TIME's.
std::string exec(const std::string& set, const std::string& counter, const std::string& record,
                 const std::string& time = "*2\r\n" + bulk("1700000000") + bulk("250000")) {
  return "*4\r\n" + set + counter + record + time;
}

}  // namespace

TEST_SUITE_BEGIN("fast acquire");

TEST_CASE("the transaction is MULTI, SET NX PX, HINCRBY, HMGET, TIME, EXEC: six replies") {
  const auto wire = encode_fast_acquire("orders:1", "v4lue", "8000");
  resp_reader reader;
  REQUIRE(reader.feed(wire->data(), wire->size()));
  std::vector<std::string> verbs;
  reply r;
  while (reader.next(r) == resp_reader::status::reply) {
    REQUIRE(r.type == reply::kind::array);
    verbs.push_back(r.elements.at(0).str);
    if (verbs.back() == "SET") {
      std::vector<std::string> args;
      for (const auto& e : r.elements) args.push_back(e.str);
      CHECK(args == std::vector<std::string>{"SET", "orders:1", "v4lue", "NX", "PX", "8000"});
    }
  }
  CHECK(verbs == std::vector<std::string>{"MULTI", "SET", "HINCRBY", "HMGET", "TIME", "EXEC"});
  CHECK(verbs.size() == fast_acquire_replies);
}

TEST_CASE("a won SET reads as the script's yes: token, identity, age from the server clock, window") {
  const reply vote = fast_acquire_answer(parse_wire(
      exec("+OK\r\n", ":42\r\n", "*3\r\n" + bulk("run-a") + bulk("1699999990000") + bulk("8000"))));
  CHECK(classify_acquire(vote) == node_status::ok);
  const auto v = read_acquire_vote(vote);
  REQUIRE(v);
  CHECK(vote.elements[0].integer == 42);
  CHECK(v->record_identity == "run-a");
  CHECK(v->age.count() == 10250);  // 1700000000250 - 1699999990000
  CHECK(v->window.count() == 8000);
}

TEST_CASE("a brand-new record reads as no identity, never seen (-1), window 0") {
  const reply vote =
      fast_acquire_answer(parse_wire(exec("+OK\r\n", ":1\r\n", "*3\r\n$-1\r\n$-1\r\n$-1\r\n")));
  const auto v = read_acquire_vote(vote);
  REQUIRE(v);
  CHECK(v->record_identity.empty());
  CHECK(v->age.count() == -1);
  CHECK(v->window.count() == 0);
}

TEST_CASE("a lost SET is the script's nil (busy, not waiting), whatever the counter did") {
  const reply r = fast_acquire_answer(parse_wire(exec("$-1\r\n", ":43\r\n", "*3\r\n$-1\r\n$-1\r\n$-1\r\n")));
  CHECK(r.type == reply::kind::nil);
  CHECK(classify_acquire(r) == node_status::taken);
}

TEST_CASE("an error inside EXEC, a refused MULTI, or a malformed record is an error naming the cause") {
  // HINCRBY on a record of the wrong type, after the SET ran.
  const reply wrongtype = fast_acquire_answer(parse_wire(
      exec("+OK\r\n", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "*0\r\n")));
  CHECK(wrongtype.is_error());
  CHECK(wrongtype.str.rfind("WRONGTYPE", 0) == 0);
  // The transport hands over the first error of the six replies.
  CHECK(fast_acquire_answer(parse_wire("-NOPERM no permissions to run the 'multi' command\r\n")).is_error());
  const reply since = fast_acquire_answer(
      parse_wire(exec("+OK\r\n", ":1\r\n", "*3\r\n" + bulk("run-a") + bulk("yesterday") + bulk("8000"))));
  CHECK(since.is_error());
  CHECK(since.str.find("since") != std::string::npos);
  const reply window = fast_acquire_answer(
      parse_wire(exec("+OK\r\n", ":1\r\n", "*3\r\n" + bulk("run-a") + bulk("1") + bulk("8s"))));
  CHECK(window.is_error());
  CHECK(window.str.find("window") != std::string::npos);
  CHECK(fast_acquire_answer(parse_wire("*1\r\n+OK\r\n")).is_error());
  CHECK(fast_acquire_answer(parse_wire("$-1\r\n")).is_error());  // EXEC aborted by a WATCH we never set
  CHECK(fast_acquire_answer(parse_wire(exec("+OK\r\n", ":1\r\n", "*3\r\n$-1\r\n$-1\r\n$-1\r\n",
                                            "*2\r\n" + bulk("x") + bulk("1"))))
            .is_error());
}

TEST_SUITE_END();
