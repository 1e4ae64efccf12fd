// The counting semaphore (include/redsync/semaphore.hpp) against real
// redis-servers: at most k holders, release and expiry, k agreed by every
// node, the quorum boundary with nodes down, the fencing rule per slot, and
// waking a waiter on release.

#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// The resource of the fencing rule (semaphore.hpp): per slot, the highest
// token accepted; a write with a lower token is refused.
class fenced_resource {
 public:
  bool write(std::uint32_t slot, redsync::fencing_token token) {
    std::lock_guard lk(mu_);
    auto& highest = highest_[slot];
    if (token < highest) return false;
    highest = token;
    return true;
  }

 private:
  std::mutex mu_;
  std::map<std::uint32_t, redsync::fencing_token> highest_;
};

redsync::semaphore_options quick_semaphore(redsync::semaphore_options o = {}) {
  if (!o.retry_delay) o.retry_delay = [](int) { return 20ms; };
  return o;
}

}  // namespace

TEST_SUITE("semaphore") {
  TEST_CASE("at most k holders at once, each on its own slot, under contention from several threads") {
    cluster c(5);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-contention");
    constexpr int k = 2;
    constexpr int threads = 6;
    constexpr int rounds = 5;
    auto sem = rs.new_semaphore(name, k, quick_semaphore({.expiry = 5s, .tries = 1000}));
    REQUIRE(sem.quorum() == 4);
    std::atomic<int> inside{0};
    std::atomic<int> most{0};
    std::atomic<int> acquired{0};
    std::atomic<int> slot_clash{0};
    std::array<std::atomic<int>, k> on_slot{};
    std::vector<std::thread> workers;
    std::vector<std::string> failures(threads);
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        for (int r = 0; r < rounds; ++r) {
          auto got = sem.acquire(redsync::context::timeout(60s));
          if (!got) {
            failures[t] = got.describe();
            return;
          }
          ++acquired;
          const int now = ++inside;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          if (++on_slot[got.permit.slot()] > 1) ++slot_clash;
          std::this_thread::sleep_for(5ms);
          --on_slot[got.permit.slot()];
          --inside;
          (void)got.permit.release(redsync::context::timeout(5s));
        }
      });
    }
    for (auto& w : workers) w.join();
    for (const auto& f : failures) CHECK_MESSAGE(f.empty(), f);
    CHECK(acquired == threads * rounds);
    CHECK(most <= k);
    CHECK(most >= 1);
    CHECK(slot_clash == 0);
  }

  TEST_CASE("a release frees a permit at once, an expiry once the permit's validity has passed") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-release");
    auto sem = rs.new_semaphore(name, 2, quick_semaphore({.expiry = 1s}));
    auto a = sem.try_acquire({});
    auto b = sem.try_acquire({});
    REQUIRE_MESSAGE(a.ok(), a.describe());
    REQUIRE_MESSAGE(b.ok(), b.describe());
    CHECK(a.permit.slot() != b.permit.slot());
    CHECK(a.permit.held());
    // Both keys live as long as the latest permit, no longer.
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      for (const std::string& key : {"redsync:sem:{" + name + "}", "redsync:sem:{" + name + "}:permits"}) {
        CAPTURE(key);
        const long long ttl = cl.pttl(key);
        CHECK(ttl > 0);
        CHECK(ttl <= 1000);
      }
    }
    auto third = sem.try_acquire({});
    CHECK(third.outcome.is(redsync::errc::busy));
    CHECK_FALSE(third.permit.held());

    REQUIRE(a.permit.release({}).ok());
    CHECK_FALSE(a.permit.held());
    CHECK(a.permit.release({}).is(redsync::errc::not_held));
    auto after_release = sem.try_acquire({});
    CHECK_MESSAGE(after_release.ok(), after_release.describe());

    // b is neither released nor extended: its permit expires on the nodes,
    // never before its local validity (until()) has passed.
    redsync::acquire_result after_expiry;
    REQUIRE(wait_until(
        [&] {
          after_expiry = sem.try_acquire({});
          return after_expiry.ok();
        },
        10s));
    CHECK(clock_type::now() >= b.permit.until());
    CHECK_FALSE(b.permit.held());
    CHECK(b.permit.release({}).is(redsync::errc::expired));
  }

  TEST_CASE("one try finds the free slot, whichever slot it asked for first") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto sem = rs.new_semaphore(unique_name("sem-slot"), 3, quick_semaphore());
    auto a = sem.try_acquire({});
    auto b = sem.try_acquire({});
    REQUIRE_MESSAGE(a.ok(), a.describe());
    REQUIRE_MESSAGE(b.ok(), b.describe());
    for (int i = 0; i < 10; ++i) {
      CAPTURE(i);
      auto r = sem.try_acquire({});
      REQUIRE_MESSAGE(r.ok(), r.describe());
      CHECK(r.outcome.attempts == 1);
      CHECK(r.permit.slot() != a.permit.slot());
      CHECK(r.permit.slot() != b.permit.slot());
      REQUIRE(r.permit.release({}).ok());
    }
  }

  TEST_CASE("extend pushes a permit's validity back while a quorum still has it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto sem = rs.new_semaphore(unique_name("sem-extend"), 1, quick_semaphore({.expiry = 1s}));
    auto a = sem.try_acquire({});
    REQUIRE_MESSAGE(a.ok(), a.describe());
    const auto first_until = a.permit.until();
    std::this_thread::sleep_for(50ms);
    REQUIRE(a.permit.extend({}).ok());
    CHECK(a.permit.until() > first_until);
    REQUIRE(a.permit.release({}).ok());
    CHECK(a.permit.extend({}).is(redsync::errc::not_held));
  }

  TEST_CASE("a client with another number of permits is refused, naming both numbers") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-mismatch");
    auto two = rs.new_semaphore(name, 2, quick_semaphore());
    auto three = rs.new_semaphore(name, 3, quick_semaphore());
    auto held = two.try_acquire({});
    REQUIRE_MESSAGE(held.ok(), held.describe());
    auto refused = three.acquire(redsync::context::timeout(10s));
    CHECK(refused.outcome.is(redsync::errc::permits_mismatch));
    CHECK_MESSAGE(refused.outcome.reason.find("made with 3 permits") != std::string::npos,
                  refused.describe());
    CHECK_MESSAGE(refused.outcome.reason.find("stores 2") != std::string::npos, refused.describe());
    CHECK(refused.outcome.attempts == 1);  // no retry: the holders' k does not change under it
    // Once nobody holds it, nothing is left on the nodes, and the new
    // number is taken.
    REQUIRE(held.permit.release({}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      CHECK_FALSE(cl.exists("redsync:sem:{" + name + "}"));
      CHECK_FALSE(cl.exists("redsync:sem:{" + name + "}:permits"));
    }
    auto taken_over = three.try_acquire({});
    CHECK_MESSAGE(taken_over.ok(), taken_over.describe());
  }

  TEST_CASE("with N=5 and k=2 (quorum 4) one node down still grants, two down give no quorum") {
    cluster c(5);
    prime_records(c.uris());
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-down");
    auto sem = rs.new_semaphore(name, 2, quick_semaphore({.expiry = 2s}));
    REQUIRE(sem.quorum() == 4);
    // N - q + 1 = 2 nodes down is where it stops: walk every single node and
    // every pair.
    for (std::size_t i = 0; i < c.size(); ++i) {
      CAPTURE(i);
      c[i].pause();
      auto r = sem.try_acquire({});
      c[i].resume();
      CHECK_MESSAGE(r.ok(), r.describe());
      if (r) CHECK(r.permit.release(redsync::context::timeout(5s)).ok());
    }
    for (std::size_t i = 0; i < c.size(); ++i) {
      for (std::size_t j = i + 1; j < c.size(); ++j) {
        CAPTURE(i);
        CAPTURE(j);
        c[i].pause();
        c[j].pause();
        auto r = sem.try_acquire({});
        c[i].resume();
        c[j].resume();
        CHECK_MESSAGE(r.outcome.is(redsync::errc::no_quorum), r.describe());
        CHECK(r.outcome.nodes_with(redsync::node_status::timeout).size() == 2);
      }
    }
  }

  TEST_CASE("a failed acquisition leaves no permit behind, on nodes that answered late too") {
    cluster c(5);
    prime_records(c.uris());
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-undo");
    auto sem = rs.new_semaphore(name, 1, quick_semaphore({.expiry = 20s}));
    REQUIRE(sem.quorum() == 3);
    // Another holder's permit on nodes 0 and 1, and node 2 paused: the
    // attempt is granted by 3 and 4 only, and by 2 once it resumes.
    for (std::size_t i : {0, 1}) {
      redis_client cl(c[i]);
      cl.command({"ZADD", "redsync:sem:{" + name + "}", "99999999999999", "0:someone-else"});
      cl.command({"SET", "redsync:sem:{" + name + "}:permits", "1"});
    }
    c[2].pause();
    auto r = sem.try_acquire({});
    c[2].resume();
    // The other holder stood in the way (2 nodes), not the paused node.
    CHECK_MESSAGE(r.outcome.is(redsync::errc::busy), r.describe());
    for (std::size_t i : {2, 3, 4}) {
      CAPTURE(i);
      redis_client cl(c[i]);
      CHECK(wait_until([&] { return permits_on(cl, name) == 0; }, 5s));
    }
  }

  TEST_CASE("a paused holder's stale write is refused by a resource that keeps the highest token per slot") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-fence");
    // Expiry 4 s, not less: the per-node timeout is 5 % of it, and under
    // TSan on two loaded cores 25 ms (an expiry of 500 ms) let two of the
    // three nodes time out the single try.
    auto sem = rs.new_semaphore(name, 2, quick_semaphore({.expiry = 4s}));
    fenced_resource resource;
    auto a = sem.try_acquire({});
    REQUIRE_MESSAGE(a.ok(), a.describe());
    REQUIRE(resource.write(a.permit.slot(), a.permit.token()));
    // While a is live, nobody else gets its slot; and one try finds the
    // other slot, whichever it asked for first.
    auto other = sem.try_acquire({});
    REQUIRE_MESSAGE(other.ok(), other.describe());
    CHECK(other.permit.slot() != a.permit.slot());
    REQUIRE(other.permit.release({}).ok());

    // a "pauses" past its expiry; two new holders take both slots, one of
    // them a's, with a greater token, and write.
    REQUIRE(wait_until([&] { return !a.permit.held(); }, 10s));
    std::vector<redsync::permit> next;
    REQUIRE(wait_until(
        [&] {
          auto r = sem.try_acquire({});
          if (r) next.push_back(std::move(r.permit));
          return next.size() == 2;
        },
        10s));
    const auto successor = std::find_if(
        next.begin(), next.end(), [&](const redsync::permit& p) { return p.slot() == a.permit.slot(); });
    REQUIRE(successor != next.end());
    CHECK(successor->token() > a.permit.token());
    for (const auto& p : next) CHECK(resource.write(p.slot(), p.token()));
    // a wakes up and writes with its old permit: refused.
    CHECK_FALSE(resource.write(a.permit.slot(), a.permit.token()));
  }

  TEST_CASE("a waiter is woken by a release, well before its retry delay") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-wake");
    static constexpr auto long_delay = 20s;
    auto sem =
        rs.new_semaphore(name, 1, {.expiry = 30s, .tries = 2, .retry_delay = [](int) { return long_delay; }});
    auto holder = sem.try_acquire({});
    REQUIRE_MESSAGE(holder.ok(), holder.describe());
    const auto started = clock_type::now();
    auto waiter = sem.acquire_future(redsync::context::timeout(2 * long_delay));
    // Release only once the waiter's first attempt reached a node (and was
    // refused): seen in the node's command stats, not guessed with a sleep.
    redis_client probe(c[0]);
    const auto before = probe.calls("evalsha") + probe.calls("eval");
    REQUIRE(wait_until([&] { return probe.calls("evalsha") + probe.calls("eval") > before; }, 10s));
    REQUIRE(holder.permit.release({}).ok());
    auto got = waiter.get();
    const auto waited = clock_type::now() - started;
    CHECK_MESSAGE(got.ok(), got.describe());
    CHECK(waited < long_delay);
  }

  TEST_CASE("a quorum below the bound is refused at construction: N=3, k=2 needs all 3 nodes") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    CHECK(rs.new_semaphore(unique_name("sem-bound"), 2).quorum() == 3);
    CHECK_THROWS_WITH_AS(rs.new_semaphore(unique_name("sem-bound"), 2, {.quorum = 2}),
                         doctest::Contains("semaphore_options.quorum = 2"), redsync::config_error);
    CHECK_THROWS_WITH_AS(rs.new_semaphore(unique_name("sem-bound"), 0), doctest::Contains("permits = 0"),
                         redsync::config_error);
    CHECK_THROWS_WITH_AS(rs.new_semaphore(unique_name("sem-bound"), 2, {.tries = 0}),
                         doctest::Contains("semaphore_options.tries = 0"), redsync::config_error);
  }

  TEST_CASE("in functions mode a permit is acquired, extended and released with FCALL") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes({.script_mode = redsync::script_mode::functions}));
    auto sem = rs.new_semaphore(unique_name("sem-functions"), 2, quick_semaphore());
    auto a = sem.try_acquire({});
    REQUIRE_MESSAGE(a.ok(), a.describe());
    CHECK(a.permit.extend({}).ok());
    CHECK(a.permit.release({}).ok());
    redis_client cl(c[0]);
    CHECK(cl.calls("fcall") >= 3);
    CHECK(cl.calls("eval") == 0);
    CHECK(cl.calls("evalsha") == 0);
  }

  TEST_CASE("a permit destroyed while held is released in the background") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("sem-raii");
    auto sem = rs.new_semaphore(name, 1, quick_semaphore({.expiry = 30s}));
    {
      auto a = sem.try_acquire({});
      REQUIRE_MESSAGE(a.ok(), a.describe());
    }
    redsync::acquire_result again;
    CHECK(wait_until(
        [&] {
          again = sem.try_acquire({});
          return again.ok();
        },
        10s));
  }

  TEST_CASE("a restarted node does not vote for a permit until its fencing counter is repaired") {
    cluster c(3);
    prime_records(c.uris());
    c[2].restart();  // forgets its record: its counter may be behind
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto sem = rs.new_semaphore(unique_name("sem-trust"), 1, quick_semaphore({.expiry = 300ms}));
    REQUIRE(sem.quorum() == 2);
    auto r = sem.try_acquire({});
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK_MESSAGE(r.outcome.nodes[2].status == redsync::node_status::excluded, r.describe());
    CHECK(r.outcome.nodes[2].message.find("not verified") != std::string::npos);
    REQUIRE(r.permit.release({}).ok());
    // Repaired after the repair delay, it votes again.
    CHECK(wait_until(
        [&] {
          auto again = sem.try_acquire({});
          const bool votes = again.ok() && again.outcome.nodes[2].status == redsync::node_status::ok;
          if (again) (void)again.permit.release({});
          return votes;
        },
        10s));
  }

  TEST_CASE("N=3, k=2: with the slot rule even a majority could not seat a third holder") {
    // The counter-example to a majority quorum: holders on {0,1}, {1,2} and
    // {0,2}. A count alone would grant all three (each node grants 2); the
    // slot rule refuses the third on either slot. (The quorum is still the
    // pigeonhole bound, 3 here: README, "Counting semaphores".)
    cluster c(3);
    const auto name = unique_name("sem-majority");
    const auto& script = redsync::detail::semaphore_acquire_script();
    const auto grant = [&](std::size_t node, const char* member, const char* slot) {
      redis_client cl(c[node]);
      // A call that does not queue (no waiter, "0"), into an empty line.
      const std::string set = "redsync:sem:{" + name + "}";
      const auto r =
          cl.command({"EVAL", std::string(script.source), "6", set, set + ":permits", name, "redsync:node",
                      set + ":line", set + ":leases", member, slot, "2", "60000", "", "", "0", "0"});
      REQUIRE(r.type == redis_client::reply::kind::array);
      return r.elements.at(0).integer > 0;
    };
    CHECK(grant(0, "0:first", "0"));
    CHECK(grant(1, "0:first", "0"));
    CHECK(grant(1, "1:second", "1"));
    CHECK(grant(2, "1:second", "1"));
    // Nodes 0 and 2 each hold one permit, below k = 2, yet no slot is free
    // on both.
    for (const char* slot : {"0", "1"}) {
      CAPTURE(slot);
      const std::string member = std::string(slot) + ":third";
      CHECK_FALSE((grant(0, member.c_str(), slot) && grant(2, member.c_str(), slot)));
    }
  }

  TEST_CASE("a permit destroyed right before its Redsync is still released on every node") {
    cluster c(3);
    const auto name = unique_name("sem-shutdown");
    {
      redsync::Redsync rs(c.uris(), fresh_nodes());
      auto sem = rs.new_semaphore(name, 1, quick_semaphore({.expiry = 60s}));
      auto a = sem.try_acquire({});
      REQUIRE_MESSAGE(a.ok(), a.describe());
    }  // a, then sem, then rs
    for (std::size_t i = 0; i < c.size(); ++i) {
      CAPTURE(i);
      redis_client cl(c[i]);
      CHECK(permits_on(cl, name) == 0);
    }
  }
}
