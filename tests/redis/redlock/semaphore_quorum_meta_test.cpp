// Why a semaphore needs both the pigeonhole quorum and a count per node, on
// the README's counter-example, end to end through the library: N = 3 nodes,
// k = 2, three clients that each reach only two of the nodes ({0,1}, {1,2},
// {0,2}, the third being a server that was killed). With the test-only unsafe
// variant (lib/redlock/semaphore/semaphore_test_access.hpp: a majority quorum, nodes
// counting permits but ignoring slots) all three hold at once; with the
// default options the third is refused. The chaos meta-test relies on the
// same variant producing more than k holders (docs/chaos.md).

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "redlock/semaphore/semaphore_test_access.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

constexpr int k = 2;

// Long enough for every step of a test on a loaded machine; the permits
// are released at the end.
redsync::semaphore_options options() {
  return {.expiry = 20s, .tries = 1};
}

// The counter-example's set-up: 3 live nodes (their records primed), and
// three clients, client i reaching every node but node (i + 2) % 3 (the node
// sets {0,1}, {1,2}, {0,2}); the missing node's place holds the address of
// a fourth server, killed, which refuses connections.
struct counter_example {
  counter_example() : c(4) {
    c[3].kill();
    live = c.uris();
    live.pop_back();
    prime_records(live);
    for (std::size_t i = 0; i < 3; ++i) {
      std::vector<std::string> uris = live;
      uris[(i + 2) % 3] = c[3].uri();
      clients[i] = std::make_unique<redsync::Redsync>(uris, fresh_nodes());
    }
  }
  // Client i's semaphore `name` with the test-only `unsafe` settings.
  redsync::Semaphore unsafe(std::size_t i, const std::string& name,
                            redsync::detail::unsafe_semaphore_config u) {
    return redsync::detail::semaphore_test_access::make_unsafe(*clients[i], name, k, options(), u);
  }

  cluster c;
  std::vector<std::string> live;
  std::array<std::unique_ptr<redsync::Redsync>, 3> clients;
};

}  // namespace

TEST_SUITE("semaphore quorum meta") {
  TEST_CASE("N=3, k=2: a majority quorum with nodes counting only seats 3 holders on {0,1}, {1,2}, {0,2}") {
    counter_example x;
    const auto name = unique_name("sem-meta-count");
    std::vector<redsync::Semaphore> sems;
    for (std::size_t i = 0; i < 3; ++i) sems.push_back(x.unsafe(i, name, {.quorum = 2, .count_only = true}));
    REQUIRE(sems[0].quorum() == 2);
    std::vector<redsync::permit> held;
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      auto r = sems[i].try_acquire(redsync::context::timeout(5s));
      CHECK_MESSAGE(r.ok(), r.describe());
      // Granted by exactly the two nodes the client reaches.
      CHECK(r.outcome.nodes_with(redsync::node_status::ok).size() == 2);
      if (r) held.push_back(std::move(r.permit));
    }
    // k + 1 = 3 holders at once, and no node grants more than k: the
    // pigeonhole bound (3 * 2 grants = 2 * 3 nodes) is what a majority misses.
    CHECK(held.size() == 3);
    for (const auto& h : held) CHECK(h.held());
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      redis_client cl(x.c[i]);
      CHECK(cl.command({"ZCARD", "redsync:sem:{" + name + "}"}).integer == k);
    }
    for (auto& h : held) CHECK(h.release(redsync::context::timeout(5s)).ok());
  }

  TEST_CASE("N=3, k=2: a majority quorum with the slot rule still refuses the third holder") {
    // Why the meta mode turns slots off as well: each slot is a mutex with
    // a majority quorum, so with slots a majority is already safe.
    counter_example x;
    const auto name = unique_name("sem-meta-slots");
    std::vector<redsync::Semaphore> sems;
    for (std::size_t i = 0; i < 3; ++i) sems.push_back(x.unsafe(i, name, {.quorum = 2}));
    auto a = sems[0].try_acquire(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(a.ok(), a.describe());
    auto b = sems[1].try_acquire(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(b.ok(), b.describe());
    // b shares node 1 with a, so it took the other slot; client 2's nodes
    // 0 and 2 then have one permit each, of different slots: no slot is
    // free on both.
    CHECK(a.permit.slot() != b.permit.slot());
    auto third = sems[2].try_acquire(redsync::context::timeout(5s));
    CHECK_MESSAGE(third.outcome.is(redsync::errc::busy), third.describe());
    CHECK(a.permit.release(redsync::context::timeout(5s)).ok());
    CHECK(b.permit.release(redsync::context::timeout(5s)).ok());
  }

  TEST_CASE("N=3, k=2: the default options need all 3 nodes, so at most 2 hold, and the third is refused") {
    counter_example x;
    const auto name = unique_name("sem-meta-default");
    // The counter-example's clients: two nodes are below the quorum of 3.
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      auto sem = x.clients[i]->new_semaphore(name, k, options());
      REQUIRE(sem.quorum() == 3);
      auto r = sem.try_acquire(redsync::context::timeout(5s));
      CHECK_MESSAGE(r.outcome.is(redsync::errc::no_quorum), r.describe());
    }
    // Three clients that reach every node: two hold, the third is refused.
    std::array<std::unique_ptr<redsync::Redsync>, 3> full;
    std::vector<redsync::permit> held;
    int refused = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      full[i] = std::make_unique<redsync::Redsync>(x.live, fresh_nodes());
      auto r = full[i]->new_semaphore(name, k, options()).try_acquire(redsync::context::timeout(5s));
      if (r) {
        held.push_back(std::move(r.permit));
      } else {
        CHECK_MESSAGE(r.outcome.is(redsync::errc::busy), r.describe());
        ++refused;
      }
    }
    CHECK(held.size() == 2);
    CHECK(refused == 1);
    for (auto& h : held) CHECK(h.release(redsync::context::timeout(5s)).ok());
  }
}
