// One name is never held as a mutex and as a semaphore at once (rule X of
// lib/redlock/scripts/semaphore_scripts.hpp; issue 36, semaphore item b):
// a semaphore's permits keep a kind mark in the name's lock key, on which a
// Mutex's SET NX fails (script or MULTI/EXEC transaction), and a permit is
// refused while the lock key holds a Mutex's value. Against real
// redis-servers, standalone and cluster members, in both script modes.

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

// What the semaphore's permits keep in the lock key (lua/kind_mark.lua).
const std::string kc_mark("\0redsync:semaphore\0", 19);

redsync::mutex_options kc_mutex(int tries = 3) {
  return {.tries = tries, .retry_delay = [](int) { return 20ms; }};
}

redsync::semaphore_options kc_semaphore(int tries = 3) {
  return {.tries = tries, .retry_delay = [](int) { return 20ms; }};
}

// The key's value on every node (nullopt where it is absent).
std::vector<std::optional<std::string>> kc_values(cluster& c, const std::string& key) {
  std::vector<std::optional<std::string>> out;
  for (std::size_t i = 0; i < c.size(); ++i) out.push_back(redis_client(c[i]).get(key));
  return out;
}

bool kc_absent_everywhere(cluster& c, const std::string& key) {
  for (std::size_t i = 0; i < c.size(); ++i)
    if (redis_client(c[i]).exists(key)) return false;
  return true;
}

redsync::redsync_options kc_options(redsync::script_mode mode) {
  redsync::redsync_options o = fresh_nodes();
  o.script_mode = mode;
  return o;
}

}  // namespace

TEST_SUITE("kind_clash") {
  TEST_CASE(
      "a name held as a mutex refuses a semaphore with kind_clash, and grants it once the mutex lets go") {
    cluster c(3);
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      redsync::Redsync rs(c.uris(), kc_options(mode));
      const auto name = unique_name("kind-mutex-first");
      auto m = rs.new_mutex(name, kc_mutex());
      REQUIRE(m.lock(redsync::context::timeout(10s)).ok());

      auto sem = rs.new_semaphore(name, 1, kc_semaphore());
      auto refused = sem.acquire(redsync::context::timeout(10s));
      CHECK_FALSE(refused.ok());
      CHECK(refused.outcome.is(redsync::errc::kind_clash));
      CHECK(refused.outcome.attempts == 3);  // retried like a busy name
      CHECK_MESSAGE(refused.outcome.reason == "\"" + name + "\" is held as a mutex",
                    refused.outcome.describe());
      for (const auto& n : refused.outcome.nodes) {
        CHECK(n.status == redsync::node_status::taken);
        CHECK(n.message == "\"" + name + "\" is held as a mutex");
      }
      // Nothing written: no permit, and the holder's value untouched.
      CHECK(kc_absent_everywhere(c, "redsync:sem:{" + name + "}"));
      for (const auto& v : kc_values(c, name)) CHECK(v == m.value());
      CHECK(m.held());

      // Availability: once the mutex is released, the semaphore gets it.
      REQUIRE(m.unlock(redsync::context::timeout(10s)).ok());
      auto granted = sem.acquire(redsync::context::timeout(10s));
      REQUIRE_MESSAGE(granted.ok(), granted.outcome.describe());
      CHECK(granted.permit.release(redsync::context::timeout(10s)).ok());
      CHECK(kc_absent_everywhere(c, name));
    }
  }

  TEST_CASE(
      "a name held as a semaphore refuses a mutex with kind_clash, and grants it once the permit is "
      "released") {
    cluster c(3);
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      redsync::Redsync rs(c.uris(), kc_options(mode));
      const auto name = unique_name("kind-semaphore-first");
      auto sem = rs.new_semaphore(name, 1, kc_semaphore());
      auto p = sem.acquire(redsync::context::timeout(10s));
      REQUIRE_MESSAGE(p.ok(), p.outcome.describe());
      // The permit keeps the kind mark in the lock key, as long as the permit.
      for (const auto& v : kc_values(c, name)) CHECK(v == kc_mark);

      auto m = rs.new_mutex(name, kc_mutex());
      auto refused = m.lock(redsync::context::timeout(10s));
      CHECK(refused.is(redsync::errc::kind_clash));
      CHECK(refused.attempts == 3);
      CHECK_MESSAGE(refused.reason == "\"" + name + "\" is held as a semaphore", refused.describe());
      CHECK(refused.describe().find("is held as a semaphore") != std::string::npos);
      CHECK_FALSE(m.held());
      for (const auto& v : kc_values(c, name)) CHECK(v == kc_mark);
      // The refused waiter joined no line.
      CHECK(kc_absent_everywhere(c, name + ":redsync-line"));

      // The mark follows the permit's extension and goes with its release.
      REQUIRE(p.permit.extend(redsync::context::timeout(10s)).ok());
      for (std::size_t i = 0; i < c.size(); ++i) {
        // Both expire with the last permit (each PEXPIRE of one script reads
        // the clock anew: a few milliseconds apart at most).
        redis_client node(c[i]);
        const auto mark_at = node.command({"PEXPIRETIME", name}).integer;
        const auto set_at = node.command({"PEXPIRETIME", "redsync:sem:{" + name + "}"}).integer;
        CHECK(mark_at > 0);
        CHECK(mark_at >= set_at - 5);
        CHECK(mark_at <= set_at + 5);
      }
      REQUIRE(p.permit.release(redsync::context::timeout(10s)).ok());
      CHECK(kc_absent_everywhere(c, name));
      auto granted = m.lock(redsync::context::timeout(10s));
      REQUIRE_MESSAGE(granted.ok(), granted.describe());
      // ...and the semaphore is refused again while the mutex holds.
      CHECK(sem.try_acquire(redsync::context::timeout(10s)).outcome.is(redsync::errc::kind_clash));
      CHECK(m.unlock(redsync::context::timeout(10s)).ok());
    }
  }

  // From the attack review: the mark was written only by a grant, so one
  // lost while permits lived (deleted by hand, or by a client of a version
  // without it) stayed lost for their whole life, and a mutex could take the
  // name beside them. Every semaphore script that keeps permits now writes
  // it back where the key is empty (no mutex holds the name there).
  TEST_CASE("a kind mark lost while a permit lives is written back by the permit's next extension") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("kind-mark-lost");
    auto sem = rs.new_semaphore(name, 1, kc_semaphore());
    auto p = sem.acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(p.ok(), p.outcome.describe());
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).command({"DEL", name});
    REQUIRE(p.permit.extend(redsync::context::timeout(10s)).ok());
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client node(c[i]);
      CHECK(node.get(name) == kc_mark);
      const auto mark_at = node.command({"PEXPIRETIME", name}).integer;
      const auto set_at = node.command({"PEXPIRETIME", "redsync:sem:{" + name + "}"}).integer;
      CHECK(mark_at >= set_at - 5);
      CHECK(mark_at <= set_at + 5);
    }
    auto m = rs.new_mutex(name, kc_mutex());
    CHECK(m.lock(redsync::context::timeout(10s)).is(redsync::errc::kind_clash));
    REQUIRE(p.permit.release(redsync::context::timeout(10s)).ok());
    CHECK(kc_absent_everywhere(c, name));
    CHECK(m.lock(redsync::context::timeout(10s)).ok());
  }

  // From the attack review: a waiter already in a name's line that was then
  // refused for the mark (-5) took that answer for "not in line" and, when
  // it gave up, left no line there: its stale entry headed the line until
  // its lease ran out. The mark is planted by hand where the holder's value
  // was, as a semaphore could in the gap a crashed holder's expiry leaves.
  TEST_CASE("a waiter in line that is then refused for the mark leaves the line when it gives up") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("kind-line-left");
    auto holder = rs.new_mutex(name, kc_mutex());
    REQUIRE(holder.lock(redsync::context::timeout(10s)).ok());
    // A 60 s expiry (a 3 s command timeout) and a 3 s retry delay: the
    // head's lease (twice its 3 s wait, plus that timeout, plus 1 s) outlives
    // its 4 s deadline by seconds, so only its leaving empties the line in
    // time. Its second attempt, at 3 s, is refused for the mark.
    auto waiter = rs.new_mutex(
        name, {.expiry = 60s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 3s; }});
    const auto started = std::chrono::steady_clock::now();
    auto waiting = waiter.lock_future(redsync::context::timeout(4s));
    REQUIRE(wait_until([&] { return line_on_every_node(c, name, 1); }, 2s));
    for (std::size_t i = 0; i < c.size(); ++i)
      redis_client(c[i]).command({"SET", name, kc_mark, "PX", "60000"});
    const auto r = waiting.get();
    CHECK_MESSAGE(r.is(redsync::errc::deadline_exceeded), r.describe());
    CHECK(wait_until([&] { return line_on_every_node(c, name, 0); }, 1500ms));
    CHECK(std::chrono::steady_clock::now() - started < 8s);  // before the lease could have run out
  }

  TEST_CASE("the MULTI/EXEC transaction's SET NX fails on the mark: a lock is refused, and says why") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("kind-fast");
    auto m = rs.new_mutex(name, kc_mutex(1));
    // The first acquisition learns each node's window: the next one starts
    // with the transaction (fast_acquire.hpp).
    REQUIRE(m.lock(redsync::context::timeout(10s)).ok());
    REQUIRE(m.unlock(redsync::context::timeout(10s)).ok());

    redsync::Redsync other(c.uris(), fresh_nodes());
    auto sem = other.new_semaphore(name, 1, kc_semaphore());
    auto p = sem.acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(p.ok(), p.outcome.describe());

    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).reset_stats();
    auto refused = m.lock(redsync::context::timeout(10s));
    CHECK(refused.is(redsync::errc::kind_clash));
    CHECK_FALSE(m.held());
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client node(c[i]);
      CHECK(node.calls("exec") == 1);     // the transaction went first...
      CHECK(node.calls("evalsha") == 1);  // ...and the script that followed said why
    }
    // A try_lock's transaction is not followed by the script: refused all
    // the same, as busy (the transaction cannot tell a mark from a holder).
    auto tried = m.try_lock(redsync::context::timeout(10s));
    CHECK_FALSE(tried.ok());
    CHECK_FALSE(m.held());
    for (const auto& v : kc_values(c, name)) CHECK(v == kc_mark);

    REQUIRE(p.permit.release(redsync::context::timeout(10s)).ok());
    auto granted = m.try_lock(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(granted.ok(), granted.describe());
    CHECK(m.unlock(redsync::context::timeout(10s)).ok());
  }

  TEST_CASE("a multi-name lock is refused when one of its names is held as a semaphore") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto a = unique_name("kind-multi-a");
    const auto b = unique_name("kind-multi-b");
    auto sem = rs.new_semaphore(b, 2, kc_semaphore());
    auto p = sem.acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(p.ok(), p.outcome.describe());
    auto m = rs.new_multi_mutex({a, b}, kc_mutex());
    auto refused = m.lock(redsync::context::timeout(10s));
    CHECK(refused.is(redsync::errc::kind_clash));
    CHECK_MESSAGE(refused.reason.find("is held as a semaphore") != std::string::npos, refused.describe());
    CHECK(kc_absent_everywhere(c, a));  // all or nothing
    REQUIRE(p.permit.release(redsync::context::timeout(10s)).ok());
    REQUIRE(m.lock(redsync::context::timeout(10s)).ok());
    CHECK(m.unlock(redsync::context::timeout(10s)).ok());
  }

  TEST_CASE("a name reserved for a mutex's waiter is held as a mutex: a semaphore is refused") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("kind-reserved");
    for (std::size_t i = 0; i < c.size(); ++i)
      redis_client(c[i]).command(
          {"SET", name, std::string("\0redsync:next\0", 14) + "a-waiter", "PX", "60000"});
    auto sem = rs.new_semaphore(name, 1, kc_semaphore(1));
    CHECK(sem.try_acquire(redsync::context::timeout(10s)).outcome.is(redsync::errc::kind_clash));
    CHECK(kc_absent_everywhere(c, "redsync:sem:{" + name + "}"));
  }

  TEST_CASE("with one of three nodes held as the other kind, the quorum is still reached") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("kind-minority");
    redis_client(c[0]).command({"SET", name, "someone-else's-mutex", "PX", "60000"});
    auto sem = rs.new_semaphore(name, 1, kc_semaphore(1));
    auto p = sem.try_acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(p.ok(), p.outcome.describe());
    CHECK(p.outcome.nodes[0].status == redsync::node_status::taken);
    CHECK(p.outcome.nodes[0].message == "\"" + name + "\" is held as a mutex");
    // The mark is where the permit is, never over the mutex's value.
    CHECK(redis_client(c[0]).get(name) == std::optional<std::string>("someone-else's-mutex"));
    CHECK(redis_client(c[1]).get(name) == std::optional<std::string>(kc_mark));
    CHECK(p.permit.release(redsync::context::timeout(10s)).ok());
    CHECK(redis_client(c[0]).get(name) == std::optional<std::string>("someone-else's-mutex"));
    CHECK_FALSE(redis_client(c[1]).exists(name));
  }
}

TEST_SUITE("cluster") {
  TEST_CASE(
      "on cluster members the mark is the name's cluster lock key, in its slot, and refuses either kind") {
    std::vector<std::unique_ptr<redis_cluster>> cls;
    for (int i = 0; i < 3; ++i) cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 2}));
    const std::vector<std::string> uris{cls[0]->uri(), cls[1]->uri(), cls[2]->uri()};
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      redsync::Redsync rs(uris, kc_options(mode));
      // A plain name and one with its own hash tag: the mark shares the
      // set's slot either way.
      for (const std::string& name : {unique_name("kind-cluster"), "kind:{" + unique_name("tag") + "}"}) {
        CAPTURE(name);
        const std::string lock_key = redsync::detail::cluster_lock_key(name);
        const std::string set_key = "redsync:sem:" + lock_key;
        REQUIRE(redsync::detail::key_slot(set_key) == redsync::detail::key_slot(lock_key));

        auto sem = rs.new_semaphore(name, 1, kc_semaphore());
        auto p = sem.acquire(redsync::context::timeout(20s));
        REQUIRE_MESSAGE(p.ok(), p.outcome.describe());
        for (auto& cl : cls) {
          redis_client owner((*cl)[cl->owner(redsync::detail::key_slot(lock_key))]);
          CHECK(owner.get(lock_key) == std::optional<std::string>(kc_mark));
        }
        auto m = rs.new_mutex(name, kc_mutex());
        auto refused = m.lock(redsync::context::timeout(20s));
        CHECK_MESSAGE(refused.is(redsync::errc::kind_clash), refused.describe());
        CHECK(refused.reason == "\"" + name + "\" is held as a semaphore");
        REQUIRE(p.permit.release(redsync::context::timeout(20s)).ok());

        auto held = m.lock(redsync::context::timeout(20s));
        REQUIRE_MESSAGE(held.ok(), held.describe());
        auto sem_refused = sem.acquire(redsync::context::timeout(20s));
        CHECK_MESSAGE(sem_refused.outcome.is(redsync::errc::kind_clash), sem_refused.outcome.describe());
        CHECK(sem_refused.outcome.reason == "\"" + name + "\" is held as a mutex");
        REQUIRE(m.unlock(redsync::context::timeout(20s)).ok());
        auto again = sem.acquire(redsync::context::timeout(20s));
        REQUIRE_MESSAGE(again.ok(), again.outcome.describe());
        CHECK(again.permit.release(redsync::context::timeout(20s)).ok());
      }
    }
  }
}
