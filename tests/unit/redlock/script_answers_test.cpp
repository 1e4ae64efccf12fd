// How each script's answer, and a node's INFO, is read: the pure functions
// the flows use (lib/redlock/scripts/script_answers.hpp, identify_server in node_identity.hpp).
#include <doctest/doctest.h>

#include "redlock/quorum.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "redlock/trust/node_trust.hpp"
#include "transport/resp.hpp"

#include <string>

using namespace redsync::detail;
using redsync::node_status;

namespace {

// The one reply in `wire`.
reply parse(const std::string& wire) {
  resp_reader reader;
  REQUIRE(reader.feed(wire.data(), wire.size()));
  reply r;
  REQUIRE(reader.next(r) == resp_reader::status::reply);
  return r;
}

// A bulk-string reply holding `text`, as INFO answers.
reply info(std::string text) {
  reply r;
  r.type = reply::kind::string;
  r.str = std::move(text);
  return r;
}

}  // namespace

TEST_SUITE_BEGIN("script answers");

TEST_CASE("an acquisition is a yes for a positive token, taken for a negative number or nil") {
  CHECK(classify_acquire(parse("*4\r\n:7\r\n$0\r\n\r\n:-1\r\n:0\r\n")) == node_status::ok);
  CHECK(classify_acquire(parse(":-1\r\n")) == node_status::taken);
  CHECK(classify_acquire(parse(":-2\r\n")) == node_status::taken);
  CHECK(classify_acquire(parse("$-1\r\n")) == node_status::taken);
  CHECK(classify_acquire(parse("*4\r\n:0\r\n$0\r\n\r\n:-1\r\n:0\r\n")) == node_status::reply_error);
  CHECK(classify_acquire(parse("*0\r\n")) == node_status::reply_error);
  CHECK(classify_acquire(parse(":1\r\n")) == node_status::reply_error);
  CHECK(classify_acquire(parse("+OK\r\n")) == node_status::reply_error);
}

TEST_CASE("an acquisition refused because a name is held as a semaphore is taken, and says so (-5)") {
  CHECK(classify_acquire(parse(":-5\r\n")) == node_status::taken);
  CHECK(acquire_held_as_semaphore(parse(":-5\r\n")));
  for (const char* other : {":-1\r\n", ":-2\r\n", ":-3\r\n", ":-4\r\n", "$-1\r\n", "*1\r\n:-5\r\n"})
    CHECK_FALSE(acquire_held_as_semaphore(parse(other)));
}

TEST_CASE("release, extend and check answers are 1 ok, 0 missing, -1 taken, anything else an error") {
  CHECK(classify_three_way(parse(":1\r\n")) == node_status::ok);
  CHECK(classify_three_way(parse(":0\r\n")) == node_status::missing);
  CHECK(classify_three_way(parse(":-1\r\n")) == node_status::taken);
  CHECK(classify_three_way(parse(":2\r\n")) == node_status::reply_error);
  CHECK(classify_three_way(parse("$1\r\n1\r\n")) == node_status::reply_error);
  CHECK(classify_three_way(parse("$-1\r\n")) == node_status::reply_error);
}

TEST_CASE("a fence write-back answer is 1 ok, 0 missing, anything else an error") {
  CHECK(classify_fence(parse(":1\r\n")) == node_status::ok);
  CHECK(classify_fence(parse(":0\r\n")) == node_status::missing);
  CHECK(classify_fence(parse(":-1\r\n")) == node_status::reply_error);
  CHECK(classify_fence(parse("*1\r\n:1\r\n")) == node_status::reply_error);
}

TEST_CASE("an acquisition's yes gives the record identity, the age and the recorded window") {
  const reply r = parse("*4\r\n:12\r\n$7\r\nabc:def\r\n:1500\r\n:8000\r\n");
  const auto vote = read_acquire_vote(r);
  REQUIRE(vote);
  CHECK(vote->record_identity == "abc:def");
  CHECK(vote->age.count() == 1500);
  CHECK(vote->window.count() == 8000);
  CHECK_FALSE(read_acquire_vote(parse("*3\r\n:12\r\n$0\r\n\r\n:1\r\n")));
  CHECK_FALSE(read_acquire_vote(parse("*4\r\n:12\r\n:1\r\n:1\r\n:1\r\n")));
  CHECK_FALSE(read_acquire_vote(parse(":12\r\n")));
}

TEST_CASE("a record read gives its counter, identity, server time, mark and window; '' reads as absent") {
  const reply r = parse("*6\r\n$2\r\n42\r\n$3\r\nrun\r\n$0\r\n\r\n$4\r\n1000\r\n$1\r\nm\r\n$4\r\n8000\r\n");
  const auto rec = read_node_record(r);
  REQUIRE(rec);
  CHECK(rec->has_counter);
  CHECK(rec->fence == 42);
  CHECK(rec->identity == "run");
  CHECK(rec->now_ms == 1000);
  CHECK(rec->mark == "m");
  CHECK(rec->window.count() == 8000);
  const auto empty =
      read_node_record(parse("*6\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n$0\r\n\r\n"));
  REQUIRE(empty);
  CHECK_FALSE(empty->has_counter);
  CHECK(empty->window.count() == 0);
  CHECK_FALSE(read_node_record(parse("*5\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n")));
}

TEST_CASE("a record read's mark gives when it was set and for which server identity") {
  auto record_with_mark = [](const std::string& mark) {
    return parse("*6\r\n$1\r\n1\r\n$1\r\nr\r\n$0\r\n\r\n$4\r\n9000\r\n$" + std::to_string(mark.size()) +
                 "\r\n" + mark + "\r\n$1\r\n5\r\n");
  };
  const reply r = record_with_mark("1500 AbC+/x== abc:def:load=1/0");  // the record's views point into it
  const auto rec = read_node_record(r);
  REQUIRE(rec);
  CHECK(rec->mark_ms == 1500);
  CHECK(rec->mark_identity == "abc:def:load=1/0");
  // Marks of clients before the mark was dated, or malformed ones, read as
  // no mark (the next look replaces them).
  for (const char* bad : {"AbC+/x==", "x1500 r abc", "1500 r", "1500 r ", "-5 r abc", " r abc"}) {
    CAPTURE(bad);
    const auto other = read_node_record(record_with_mark(bad));
    REQUIRE(other);
    CHECK(other->mark_ms == -1);
  }
}

TEST_CASE("a recorded window outside 0..max_expiry makes an acquisition's yes or a record unreadable") {
  // Found by tests/fuzz/reply_fuzz.cpp: a record's window fed the repair
  // delay as it was, and steady_clock::now() + delay overflowed (UB).
  CHECK_FALSE(read_acquire_vote(parse("*4\r\n:12\r\n$1\r\nr\r\n:0\r\n:-1\r\n")));
  CHECK_FALSE(read_acquire_vote(parse("*4\r\n:12\r\n$1\r\nr\r\n:0\r\n:9223372036854775807\r\n")));
  CHECK_FALSE(read_acquire_vote(parse("*4\r\n:12\r\n$1\r\nr\r\n:0\r\n:9223372036855\r\n")));
  const auto longest = read_acquire_vote(parse("*4\r\n:12\r\n$1\r\nr\r\n:0\r\n:9223372036854\r\n"));
  REQUIRE(longest);
  CHECK(longest->window == max_expiry);

  auto record_with_window = [](const std::string& window) {
    return parse("*6\r\n$1\r\n1\r\n$1\r\nr\r\n$0\r\n\r\n$1\r\n5\r\n$1\r\nm\r\n$" +
                 std::to_string(window.size()) + "\r\n" + window + "\r\n");
  };
  CHECK_FALSE(read_node_record(record_with_window("-1")));
  CHECK_FALSE(read_node_record(record_with_window("9223372036854775807")));
  CHECK_FALSE(read_node_record(record_with_window("9223372036855")));
  REQUIRE(read_node_record(record_with_window("9223372036854")));
  CHECK(read_node_record(record_with_window("9223372036854"))->window == max_expiry);
}

TEST_CASE("INFO identifies a master by run_id and replication id, and names why others cannot vote") {
  const auto ok = identify_server(info("run_id:abc\r\nrole:master\r\nmaster_replid:def\r\nx:1\r\n"));
  CHECK(ok.identity == "abc:def");
  CHECK(ok.problem.empty());
  const auto refused = identify_server(parse("-NOPERM this user has no permissions\r\n"));
  CHECK(refused.identity.empty());
  CHECK(refused.problem.find("cannot read INFO") != std::string::npos);
  CHECK(identify_server(info("role:master\r\n")).problem.find("no run_id") != std::string::npos);
  CHECK(identify_server(info("run_id:abc\r\nrole:slave\r\n")).problem.find("replica") != std::string::npos);
  const auto evicting =
      identify_server(info("run_id:a\r\nmaxmemory:100\r\nmaxmemory_policy:allkeys-lru\r\n"));
  CHECK(evicting.problem.find("evict") != std::string::npos);
}

TEST_CASE("INFO of a Redis Cluster node listed as a standalone node names redis+cluster:// to list instead") {
  const std::string cluster_info = "run_id:abc\r\nrole:master\r\ncluster_enabled:1\r\n";
  const auto listed = identify_server(info(cluster_info));
  CHECK(listed.identity.empty());
  CHECK(listed.problem.find("Redis Cluster node (cluster_enabled:1)") != std::string::npos);
  CHECK(listed.problem.find("redis+cluster://") != std::string::npos);
  // Found through a cluster member, the same server is a master like any.
  CHECK(identify_server(info(cluster_info), redsync::script_mode::eval, listed_as::cluster_master).identity ==
        "abc");
  CHECK(identify_server(info("run_id:abc\r\ncluster_enabled:0\r\n")).identity == "abc");
  // With the node's names: its number, URI, and the URI to use.
  CHECK(cluster_node_problem(cluster_info, 2, "redis://127.0.0.1:7002")
            .starts_with("node 2 (redis://127.0.0.1:7002) is a Redis Cluster node (cluster_enabled:1): "));
  CHECK(cluster_node_problem(cluster_info, 2, "redis://127.0.0.1:7002")
            .find("list it as redis+cluster://127.0.0.1:7002 ") != std::string::npos);
  CHECK(
      cluster_node_problem(cluster_info, 1, "rediss://h:7000").find("list it as rediss+cluster://h:7000 ") !=
      std::string::npos);
  CHECK(cluster_node_problem("cluster_enabled:0\r\n", 1, "redis://h:1").empty());
}

TEST_CASE("INFO's redis_version is parsed, and a version below the mode's minimum is named") {
  CHECK(redis_version("# Server\r\nredis_version:7.0.15\r\n") == server_version{7, 0, 15});
  CHECK(redis_version("redis_version:4.0.9\r\nrun_id:a\r\n") == server_version{4, 0, 9});
  CHECK(redis_version("redis_version:6.2\r\n") == server_version{6, 2, 0});
  CHECK(redis_version("redis_version:7.2.4-rc1\r\n") == std::nullopt);
  CHECK(redis_version("redis_version:7.2.4.1\r\n") == server_version{7, 2, 4});
  CHECK(redis_version("redis_version:7\r\n") == std::nullopt);
  CHECK(redis_version("redis_version:\r\n") == std::nullopt);
  CHECK(redis_version("redis_version:x.y\r\n") == std::nullopt);
  CHECK(redis_version("redis_version:9999999.0\r\n") == std::nullopt);
  CHECK(redis_version("run_id:a\r\n") == std::nullopt);
  CHECK(redis_version("valkey_redis_version:4.0.0\r\n") == std::nullopt);  // whole field names only

  using redsync::script_mode;
  CHECK(minimum_version(script_mode::eval) == server_version{5, 0, 0});
  CHECK(minimum_version(script_mode::functions) == server_version{7, 0, 0});

  const auto old = identify_server(info("redis_version:4.0.9\r\nrun_id:abc\r\n"));
  CHECK(old.identity.empty());
  CHECK(old.problem.find("runs Redis 4.0.9; redsync-cpp needs Redis >= 5.0") != std::string::npos);
  CHECK(identify_server(info("redis_version:5.0.0\r\nrun_id:abc\r\n")).identity == "abc");

  const auto six = identify_server(info("redis_version:6.2.14\r\nrun_id:abc\r\n"), script_mode::functions);
  CHECK(six.identity.empty());
  CHECK(six.problem.find("runs Redis 6.2.14; redsync_options::script_mode = functions needs Redis >= 7.0") !=
        std::string::npos);
  CHECK(identify_server(info("redis_version:6.2.14\r\nrun_id:abc\r\n")).identity == "abc");
  CHECK(identify_server(info("redis_version:7.0.0\r\nrun_id:abc\r\n"), script_mode::functions).identity ==
        "abc");
  // No redis_version at all: not judged by version (the other checks decide).
  CHECK(identify_server(info("run_id:abc\r\n"), script_mode::functions).identity == "abc");
  // A load in place (DEBUG RELOAD) keeps run_id and replication id; the
  // last load's key counts change the identity.
  CHECK(identify_server(info("run_id:abc\r\nmaster_replid:def\r\nrdb_last_load_keys_expired:0\r\n"
                             "rdb_last_load_keys_loaded:0\r\n"))
            .identity == "abc:def");
  CHECK(identify_server(info("run_id:abc\r\nmaster_replid:def\r\nrdb_last_load_keys_expired:2\r\n"
                             "rdb_last_load_keys_loaded:7\r\n"))
            .identity == "abc:def:load=7/2");
}

TEST_SUITE_END();
