// One server listed under two names (127.0.0.1 and localhost) votes once:
// the connections read its run_id, and the later name never votes
// (lib/redlock/trust/node_trust.hpp). The engine already rejects the same address
// twice (lock_test.cpp); two names for one server are only told apart once
// connected.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

// Nodes 1 and 3 are server 0 (as 127.0.0.1 and as localhost), node 2 is
// server 1.
std::vector<std::string> twin_list(cluster& c) {
  return {"redis://127.0.0.1:" + std::to_string(c[0].port()), c[1].uri(),
          "redis://localhost:" + std::to_string(c[0].port())};
}

std::string twin_message(cluster& c) {
  const std::string port = std::to_string(c[0].port());
  return "node 3 (redis://localhost:" + port + ") is the same server as node 1 (redis://127.0.0.1:" + port +
         ")";
}

}  // namespace

TEST_SUITE("trust") {
  TEST_CASE("one server under two names votes once: its later name is excluded, naming both URIs") {
    cluster c(2);
    redsync::Redsync rs(twin_list(c), fresh_nodes());
    auto m = rs.new_mutex(unique_name("twin-votes-once"), {.expiry = 2s, .tries = 50});
    auto r = m.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    REQUIRE(r.nodes.size() == 3);
    CHECK(r.nodes[0].status == redsync::node_status::ok);
    CHECK(r.nodes[1].status == redsync::node_status::ok);
    CHECK(r.nodes[2].status == redsync::node_status::excluded);
    CHECK_MESSAGE(r.nodes[2].message.find(twin_message(c)) != std::string::npos, r.nodes[2].message);
    CHECK(r.nodes[2].message.find("one server must not vote twice") != std::string::npos);
    // Extending counts the server once too: its later name is left out.
    auto extended = m.extend();
    CHECK_MESSAGE(extended.ok(), extended.describe());
    CHECK(extended.nodes[2].status == redsync::node_status::excluded);
    CHECK(m.unlock(redsync::context{}).ok());
    CHECK_FALSE(redis_client(c[0]).exists(m.name()));
    CHECK(rs.stats().nodes[2].excluded);
  }

  TEST_CASE("a lock fails when only the server listed twice is up: one server is not 2 of 3 votes") {
    cluster c(2);
    const auto list = twin_list(c);
    redsync::test::prime_records(list);
    c[1].kill();
    redsync::Redsync rs(list, fresh_nodes());
    const auto name = unique_name("twin-no-quorum");
    auto m = rs.new_mutex(name, {.expiry = 2s, .tries = 3, .retry_delay = [](int) { return 50ms; }});
    auto r = m.lock(redsync::context::timeout(5s));
    CHECK_FALSE(r.ok());
    CHECK(r.error == redsync::errc::no_quorum);
    CHECK_FALSE(m.held());
    REQUIRE(r.nodes.size() == 3);
    CHECK(r.nodes[0].status == redsync::node_status::ok);
    CHECK(r.nodes[2].status == redsync::node_status::excluded);
    CHECK_MESSAGE(r.nodes[2].message.find(twin_message(c)) != std::string::npos, r.nodes[2].message);
    CHECK_MESSAGE(r.describe().find(twin_message(c)) != std::string::npos, r.describe());
    // The failed attempt was undone on the server.
    CHECK_FALSE(redis_client(c[0]).exists(name));
  }

  TEST_CASE("the first name of a server listed twice votes, whichever order the names come in") {
    cluster c(2);
    const std::string port = std::to_string(c[0].port());
    const std::vector<std::string> list = {"redis://localhost:" + port, "redis://127.0.0.1:" + port,
                                           c[1].uri()};
    redsync::Redsync rs(list, fresh_nodes());
    auto m = rs.new_mutex(unique_name("twin-order"), {.expiry = 2s, .tries = 50});
    auto r = m.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(r.nodes[0].status == redsync::node_status::ok);
    CHECK(r.nodes[1].status == redsync::node_status::excluded);
    CHECK_MESSAGE(r.nodes[1].message.find("node 2 (redis://127.0.0.1:" + port +
                                          ") is the same server as node 1 (redis://localhost:" + port +
                                          ")") != std::string::npos,
                  r.nodes[1].message);
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a server listed twice that restarts (new run_id) is still counted once under both names") {
    cluster c(2);
    const auto list = twin_list(c);
    redsync::Redsync rs(list, fresh_nodes());
    const auto name = unique_name("twin-restart");
    // A short expiry: the restarted server votes again once repaired, about
    // one expiry after it was first seen.
    auto m = rs.new_mutex(name, {.expiry = 300ms, .tries = 1000, .retry_delay = [](int) { return 50ms; }});
    REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
    REQUIRE(m.unlock(redsync::context{}).ok());
    c[0].restart();
    // Both names reconnect to the new server run: it votes again once
    // repaired, under its first name only.
    auto again = m.lock(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(again.ok(), again.describe());
    CHECK(again.nodes[0].status == redsync::node_status::ok);
    CHECK(again.nodes[2].status == redsync::node_status::excluded);
    CHECK_MESSAGE(again.nodes[2].message.find(twin_message(c)) != std::string::npos, again.nodes[2].message);
    REQUIRE(m.unlock(redsync::context{}).ok());
    c[1].kill();
    auto alone = m.lock(redsync::context::timeout(1s));
    CHECK_FALSE(alone.ok());
    CHECK_FALSE(redis_client(c[0]).exists(name));
  }
}
