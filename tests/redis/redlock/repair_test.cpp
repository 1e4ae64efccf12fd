// When a node that lost its data votes again: the fencing counter's repair
// and the restart guard (lib/redlock/node_trust.hpp), across a load of an
// older snapshot in place (DEBUG RELOAD).

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace std::chrono_literals;
using redsync::test::cluster;
using redsync::test::fresh_nodes;
using redsync::test::prime_records;
using redsync::test::redis_client;
using redsync::test::unique_name;
using clock_type = std::chrono::steady_clock;

TEST_SUITE("repair") {
  // Issue 21 §3: DEBUG RELOAD NOSAVE loads an older snapshot in place,
  // keeping run_id and replication id: the rolled-back record used to name
  // the server still, so the node voted at once with its lost keys.
  TEST_CASE("a node that loads an older snapshot in place does not vote until repaired; tokens keep rising") {
    cluster nodes(3, {.extra_args = {"--enable-debug-command", "yes"}});
    prime_records(nodes.uris());
    const auto name = unique_name("app:reload");
    REQUIRE(redis_client(nodes[0]).command({"SAVE"}).str == "OK");
    // Node 2 says no to the first holder, which wins on nodes 0 and 1.
    REQUIRE(redis_client(nodes[2]).command({"SET", name, "someone-else"}).str == "OK");
    redsync::Redsync a_rs(nodes.uris(), fresh_nodes());
    auto a = a_rs.new_mutex(name, {.expiry = 3000ms, .tries = 1});
    auto held = a.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(held.ok(), held.describe());
    REQUIRE(redis_client(nodes[2]).command({"DEL", name}).integer == 1);
    // Node 0 goes back to the snapshot: without the lock key and the counter
    // increments since.
    REQUIRE(redis_client(nodes[0]).command({"DEBUG", "RELOAD", "NOSAVE"}).str == "OK");
    REQUIRE_FALSE(redis_client(nodes[0]).get(name));

    redsync::Redsync b_rs(nodes.uris(), fresh_nodes());
    auto b = b_rs.new_mutex(name, {.expiry = 3000ms, .tries = 1});
    auto at_once = b.lock(redsync::context::timeout(5s));
    CHECK_MESSAGE(!at_once.ok(), "two holders: ", at_once.describe());
    REQUIRE(at_once.nodes.size() == 3);
    CHECK(at_once.nodes[0].status == redsync::node_status::excluded);
    if (at_once.ok()) return;
    // Later, once the first lock has expired, the lock is granted again with
    // a higher token.
    auto later =
        b_rs.new_mutex(name, {.expiry = 3000ms, .tries = 10000, .retry_delay = [](int) { return 50ms; }});
    auto r = later.lock(redsync::context::timeout(30s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(clock_type::now() > a.until());
    CHECK(later.token() > a.token());
  }
}
