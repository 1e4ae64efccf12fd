// RWMutex (rw_mutex.hpp; lua/rw_*.lua; docs/api.md, "Read-write locks"):
// readers share a name, writers hold it alone, readers and writers are
// served in arrival order with consecutive readers together, and writers'
// tokens increase across every grant. Against real redis-servers, in both
// script modes, through a node killed and restarted empty.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"
#include "util/cluster_slot.hpp"

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

using steady = std::chrono::steady_clock;

// A retry delay far longer than a wake-up takes: a waiter that gets the
// name well before it was woken, not polling.
constexpr auto rw_slow_poll = 3s;

redsync::mutex_options rw_options(std::chrono::milliseconds delay = 20ms, int tries = 3) {
  return {.tries = tries, .retry_delay = [delay](int) { return delay; }};
}

redsync::mutex_options rw_waiting(std::chrono::milliseconds delay = rw_slow_poll) {
  return {.expiry = 8s, .tries = redsync::unlimited_tries, .retry_delay = [delay](int) { return delay; }};
}

redsync::redsync_options rw_nodes(redsync::script_mode mode = redsync::script_mode::eval) {
  redsync::redsync_options o = fresh_nodes();
  o.script_mode = mode;
  return o;
}

// Counts how many holders hold at once, and the most there ever were.
struct rw_overlap {
  std::atomic<int> now{0};
  std::atomic<int> most{0};
  std::atomic<int> arrived{0};  // never goes down
  void enter() {
    ++arrived;
    const int n = ++now;
    int m = most.load();
    while (n > m && !most.compare_exchange_weak(m, n)) {
    }
  }
  void leave() { --now; }
};

// How many wait in the name's line on this node.
long long rw_waiters(const redis_server& s, const std::string& name) {
  return redis_client(s).command({"ZCARD", name + ":redsync-line"}).integer;
}

// Which holds the observer was told of, by kind.
struct rw_observed final : redsync::observer {
  std::mutex mu;
  std::vector<std::string> seen;
  void note(const char* what, bool shared) {
    std::lock_guard lk(mu);
    seen.push_back(std::string(what) + (shared ? ":shared" : ":exclusive"));
  }
  void on_acquire(const redsync::acquire_event& e) override { note("acquire", e.shared); }
  void on_release(const redsync::release_event& e) override { note("release", e.shared); }
  void on_extend(const redsync::extend_event& e) override { note("extend", e.shared); }
  std::vector<std::string> events() {
    std::lock_guard lk(mu);
    return seen;
  }
};

}  // namespace

TEST_SUITE("rw_mutex") {
  TEST_CASE(
      "readers hold a name together; a writer is refused until the last reader lets go, then takes it") {
    cluster c(3);
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      redsync::Redsync rs(c.uris(), rw_nodes(mode));
      const auto name = unique_name("rw-readers");
      std::vector<redsync::RWMutex> readers;
      for (int i = 0; i < 3; ++i) readers.push_back(rs.new_rw_mutex(name, rw_options()));
      for (auto& r : readers) REQUIRE(r.reader().lock(redsync::context::timeout(10s)).ok());
      for (auto& r : readers) CHECK(r.reader().held());

      auto w = rs.new_rw_mutex(name, rw_options());
      auto refused = w.writer().try_lock(redsync::context::timeout(10s));
      CHECK(refused.is(redsync::errc::busy));
      CHECK_FALSE(w.try_lock());

      // A plain Mutex of the name is a writer as well.
      auto plain = rs.new_mutex(name, rw_options());
      CHECK(plain.try_lock(redsync::context::timeout(10s)).is(redsync::errc::busy));

      readers[0].unlock_shared();
      readers[1].unlock_shared();
      CHECK_FALSE(w.try_lock());  // one reader still holds
      readers[2].unlock_shared();
      REQUIRE(w.writer().lock(redsync::context::timeout(10s)).ok());
      // Every grant takes the node's next counter: the writer's token is
      // above every reader's before it.
      for (auto& r : readers) CHECK(w.writer().token() > r.reader().token());

      // While the writer holds, readers are refused, and so is another writer.
      auto late = rs.new_rw_mutex(name, rw_options());
      CHECK(late.reader().try_lock(redsync::context::timeout(10s)).is(redsync::errc::busy));
      CHECK_FALSE(late.try_lock());
      const auto writer_token = w.writer().token();
      w.unlock();
      REQUIRE(late.reader().lock(redsync::context::timeout(10s)).ok());
      CHECK(late.reader().token() > writer_token);
      REQUIRE(late.reader().unlock(redsync::context::timeout(10s)).ok());
      // Nothing is left on the nodes: no mark, no set, no line.
      for (std::size_t i = 0; i < c.size(); ++i) {
        redis_client rc(c[i]);
        CHECK_FALSE(rc.exists(name));
        CHECK_FALSE(rc.exists(name + ":redsync-readers"));
      }
    }
  }

  TEST_CASE("the observer tells a reader's events (shared) from a writer's and a plain mutex's") {
    cluster c(3);
    auto seen = std::make_shared<rw_observed>();
    redsync::redsync_options o = rw_nodes();
    o.observer = seen;
    redsync::Redsync rs(c.uris(), o);
    auto rw = rs.new_rw_mutex(unique_name("rw-observed"), rw_options());
    REQUIRE(rw.reader().lock(redsync::context::timeout(10s)).ok());
    REQUIRE(rw.reader().extend(redsync::context::timeout(10s)).ok());
    REQUIRE(rw.reader().unlock(redsync::context::timeout(10s)).ok());
    REQUIRE(rw.writer().lock(redsync::context::timeout(10s)).ok());
    REQUIRE(rw.writer().unlock(redsync::context::timeout(10s)).ok());
    REQUIRE(wait_until([&] { return seen->events().size() == 5; }, 10s));
    CHECK(seen->events() == std::vector<std::string>{"acquire:shared", "extend:shared", "release:shared",
                                                     "acquire:exclusive", "release:exclusive"});
  }

  TEST_CASE("std::shared_lock reads and std::unique_lock writes through the SharedLockable names") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rw_nodes());
    const auto name = unique_name("rw-std");
    auto a = rs.new_rw_mutex(name, rw_options());
    auto b = rs.new_rw_mutex(name, rw_options());
    {
      std::shared_lock ra(a);
      std::shared_lock rb(b);
      CHECK(a.reader().held());
      CHECK(b.reader().held());
      std::unique_lock w(a, std::try_to_lock);
      CHECK_FALSE(w.owns_lock());
    }
    std::unique_lock w(a);
    CHECK(a.writer().held());
    std::shared_lock r(b, std::try_to_lock);
    CHECK_FALSE(r.owns_lock());
  }

  TEST_CASE(
      "a writer waiting in line is woken when the last reader lets go, and readers that came after it wait") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rw_nodes());
    const auto name = unique_name("rw-writer-waits");
    auto first = rs.new_rw_mutex(name, rw_options());
    REQUIRE(first.reader().lock(redsync::context::timeout(10s)).ok());

    auto w = rs.new_rw_mutex(name, rw_waiting());
    std::atomic<bool> writer_done{false};
    redsync::result writer_result;
    steady::time_point writer_got{};
    std::thread writer([&] {
      writer_result = w.writer().lock(redsync::context::timeout(30s));
      writer_got = steady::now();
      writer_done = true;
    });
    // The writer is in line once the nodes list it.
    REQUIRE(wait_until([&] { return rw_waiters(c[0], name) == 1; }, 10s));

    // A reader arriving now is behind a waiting writer: refused, although a
    // reader holds (the writer is not starved by a stream of readers).
    auto later = rs.new_rw_mutex(name, rw_options());
    CHECK(later.reader().try_lock(redsync::context::timeout(10s)).is(redsync::errc::busy));

    const auto released = steady::now();
    REQUIRE(first.reader().unlock(redsync::context::timeout(10s)).ok());
    writer.join();
    REQUIRE(writer_result.ok());
    // Woken by the release, not by its 3 s poll.
    CHECK(writer_got - released < rw_slow_poll - 500ms);
    CHECK(w.writer().token() > first.reader().token());
    w.unlock();
  }

  TEST_CASE("readers queued behind a writer all get the name together when it lets go") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rw_nodes());
    const auto name = unique_name("rw-run");
    auto w = rs.new_rw_mutex(name, rw_options());
    REQUIRE(w.writer().lock(redsync::context::timeout(10s)).ok());

    constexpr int n = 4;
    std::vector<redsync::RWMutex> readers;
    for (int i = 0; i < n; ++i) readers.push_back(rs.new_rw_mutex(name, rw_waiting()));
    rw_overlap overlap;
    std::atomic<int> ok{0};
    std::vector<steady::time_point> got(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        if (!readers[i].reader().lock(redsync::context::timeout(30s)).ok()) return;
        got[i] = steady::now();
        ++ok;
        overlap.enter();
        // Hold until every reader holds (or a generous bound passes).
        wait_until([&] { return overlap.arrived.load() == n; }, 15s);
        overlap.leave();
        readers[i].reader().unlock(redsync::context::timeout(10s));
      });
    }
    REQUIRE(wait_until([&] { return rw_waiters(c[0], name) == n; }, 10s));
    const auto released = steady::now();
    w.unlock();
    for (auto& t : threads) t.join();
    CHECK(ok == n);
    CHECK(overlap.most == n);
    // The first reader was woken by the writer's release, the others by it.
    for (const auto& t : got) CHECK(t - released < rw_slow_poll - 500ms);
  }

  TEST_CASE(
      "a reader that arrived before a writer is served before it (readers are not starved by writers)") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rw_nodes());
    const auto name = unique_name("rw-order");
    auto holder = rs.new_rw_mutex(name, rw_options());
    REQUIRE(holder.writer().lock(redsync::context::timeout(10s)).ok());

    auto r = rs.new_rw_mutex(name, rw_waiting(200ms));
    auto w2 = rs.new_rw_mutex(name, rw_waiting(200ms));
    std::atomic<int> order{0};
    int reader_rank = 0;
    int writer_rank = 0;
    std::atomic<bool> reader_may_go{false};
    std::thread reader([&] {
      REQUIRE(r.reader().lock(redsync::context::timeout(30s)).ok());
      reader_rank = ++order;
      wait_until([&] { return reader_may_go.load(); }, 10s);
      r.reader().unlock(redsync::context::timeout(10s));
    });
    REQUIRE(wait_until([&] { return rw_waiters(c[0], name) == 1; }, 10s));
    std::thread writer([&] {
      REQUIRE(w2.writer().lock(redsync::context::timeout(30s)).ok());
      writer_rank = ++order;
      w2.writer().unlock(redsync::context::timeout(10s));
    });
    REQUIRE(wait_until([&] { return rw_waiters(c[0], name) == 2; }, 10s));
    holder.unlock();
    // The reader gets the name first; the writer still waits while it reads.
    REQUIRE(wait_until([&] { return order.load() == 1; }, 10s));
    std::this_thread::sleep_for(500ms);
    CHECK(order.load() == 1);
    reader_may_go = true;
    reader.join();
    writer.join();
    CHECK(reader_rank == 1);
    CHECK(writer_rank == 2);
  }

  TEST_CASE(
      "a reader's auto-extension keeps writers out past its expiry; a crashed reader's hold ends with it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rw_nodes());
    const auto name = unique_name("rw-extend");
    auto r = rs.new_rw_mutex(name, {.expiry = 1s, .tries = 3, .auto_extend = true});
    REQUIRE(r.reader().lock(redsync::context::timeout(10s)).ok());
    auto w = rs.new_rw_mutex(name, rw_options());
    const auto until = steady::now() + 3s;
    while (steady::now() < until) {
      CHECK_FALSE(w.try_lock());
      std::this_thread::sleep_for(300ms);
    }
    CHECK(r.reader().held());
    CHECK_FALSE(r.reader().lost());
    r.unlock_shared();
    CHECK(w.try_lock());
    w.unlock();

    // A reader that never lets go (its client gone): a writer gets the name
    // once the reader's expiry has passed, and not before.
    auto gone = rs.new_rw_mutex(name, {.expiry = 1500ms, .tries = 3});
    // Every node set the mark after this instant, for 1.5 s: the bound
    // below holds however long the lock call took to return.
    const auto asked = steady::now();
    REQUIRE(gone.reader().lock(redsync::context::timeout(10s)).ok());
    for (std::size_t i = 0; i < c.size(); ++i) {
      // What a crashed client leaves: its member and the mark, expiring.
      redis_client rc(c[i]);
      CHECK(rc.pttl(name) > 0);
    }
    auto after = rs.new_rw_mutex(name, rw_waiting(100ms));
    REQUIRE(after.writer().lock(redsync::context::timeout(10s)).ok());
    CHECK(steady::now() - asked >= 1450ms);  // not before the reader's keys expired on a majority
    after.unlock();
  }

  TEST_CASE("a writer holding a majority keeps readers out through a node killed and restarted empty") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rw_nodes());
    const auto name = unique_name("rw-kill");
    auto r = rs.new_rw_mutex(name, rw_options());
    REQUIRE(r.reader().lock(redsync::context::timeout(10s)).ok());
    c[0].kill();
    // Readers still hold the two nodes that live: the writer is refused.
    auto w = rs.new_rw_mutex(name, rw_options(20ms, 2));
    CHECK_FALSE(w.writer().try_lock(redsync::context::timeout(10s)).ok());
    REQUIRE(r.reader().unlock(redsync::context::timeout(10s)).ok());  // 2 of 3
    REQUIRE(w.writer().lock(redsync::context::timeout(10s)).ok());
    // The node comes back empty: it would grant a reader, but the writer
    // holds the other two.
    c[0].restart();
    auto r2 = rs.new_rw_mutex(name, rw_options(20ms, 2));
    auto refused = r2.reader().try_lock(redsync::context::timeout(10s));
    CHECK_FALSE(refused.ok());
    CHECK(w.writer().held());
    w.unlock();
    REQUIRE(r2.reader().lock(redsync::context::timeout(10s)).ok());
    r2.unlock_shared();
  }

  TEST_CASE(
      "a node frozen under a reader answers late: the writer waits for the reader, then gets the name") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rw_nodes());
    const auto name = unique_name("rw-frozen");
    {
      // Every node answers a first look before one freezes (fresh nodes
      // vote at once only when all of them answered it).
      auto first = rs.new_rw_mutex(name, rw_options());
      REQUIRE(first.reader().lock(redsync::context::timeout(10s)).ok());
      first.unlock_shared();
    }
    c[0].pause();
    // Granted by the two nodes that answer; the frozen one has the
    // reader's acquisition in its socket.
    auto r = rs.new_rw_mutex(name, {.expiry = 8s, .tries = 3});
    const auto got = r.reader().lock(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(got.ok(), got.describe());
    auto w = rs.new_rw_mutex(name, rw_options(20ms, 2));
    CHECK_FALSE(w.writer().lock(redsync::context::timeout(10s)).ok());
    // It wakes and runs what it was sent: the late grant (and then the
    // release, resent until it lands) must not let the writer in early, nor
    // keep it out once the reader let go.
    c[0].resume();
    CHECK_FALSE(w.writer().try_lock(redsync::context::timeout(10s)).ok());
    CHECK(r.reader().held());
    REQUIRE(r.reader().unlock(redsync::context::timeout(10s)).ok());
    auto after = rs.new_rw_mutex(name, rw_waiting(100ms));
    REQUIRE(after.writer().lock(redsync::context::timeout(10s)).ok());
    // The frozen node holds no reader any more: the release landed there
    // (well before the reader's 8 s expiry would have cleared it).
    CHECK(wait_until([&] { return !redis_client(c[0]).exists(name + ":redsync-readers"); }, 3s));
    after.unlock();
  }

  TEST_CASE("an RWMutex and a Semaphore of one name clash; names and values an RWMutex needs are refused") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rw_nodes());
    const auto name = unique_name("rw-kind");
    auto r = rs.new_rw_mutex(name, rw_options());
    REQUIRE(r.reader().lock(redsync::context::timeout(10s)).ok());
    auto sem = rs.new_semaphore(name, 2, {.tries = 2, .retry_delay = [](int) { return 20ms; }});
    CHECK(sem.acquire(redsync::context::timeout(10s)).outcome.is(redsync::errc::kind_clash));
    r.unlock_shared();
    auto p = sem.acquire(redsync::context::timeout(10s));
    REQUIRE(p.ok());
    CHECK(r.reader().try_lock(redsync::context::timeout(10s)).is(redsync::errc::kind_clash));
    // (A writer's try_lock goes as the MULTI/EXEC transaction, which reads
    // the semaphore's mark as busy: its retries go through the script.)
    CHECK(r.writer().lock(redsync::context::timeout(10s)).is(redsync::errc::kind_clash));

    CHECK_THROWS_AS(rs.new_rw_mutex(name + ":redsync-readers"), redsync::config_error);
    CHECK_THROWS_AS(rs.new_mutex(name + ":redsync-readers"), redsync::config_error);
    CHECK_THROWS_AS(rs.new_rw_mutex(name, {.value = std::string("\x01x")}), redsync::config_error);
  }
}

TEST_SUITE("cluster") {
  TEST_CASE(
      "on cluster members readers share a name and a writer waits in line for them, in both script modes") {
    std::vector<std::unique_ptr<redis_cluster>> cls;
    for (int i = 0; i < 3; ++i) cls.push_back(std::make_unique<redis_cluster>(cluster_config{.masters = 2}));
    const std::vector<std::string> uris{cls[0]->uri(), cls[1]->uri(), cls[2]->uri()};
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      redsync::Redsync rs(uris, rw_nodes(mode));
      for (const std::string& name : {unique_name("rw-cluster"), "rw:{" + unique_name("tag") + "}"}) {
        CAPTURE(name);
        const std::string lock_key = redsync::detail::cluster_lock_key(name);
        const auto slot = redsync::detail::key_slot(lock_key);
        REQUIRE(redsync::detail::key_slot(lock_key + ":redsync-readers") == slot);

        auto a = rs.new_rw_mutex(name, rw_options());
        auto b = rs.new_rw_mutex(name, rw_options());
        REQUIRE_MESSAGE(a.reader().lock(redsync::context::timeout(20s)).ok(),
                        a.reader().last_result().describe());
        REQUIRE_MESSAGE(b.reader().lock(redsync::context::timeout(20s)).ok(),
                        b.reader().last_result().describe());
        for (auto& cl : cls) {
          redis_client owner((*cl)[cl->owner(slot)]);
          CHECK(owner.command({"ZCARD", lock_key + ":redsync-readers"}).integer == 2);
        }
        auto w = rs.new_rw_mutex(name, rw_waiting());
        auto wf = w.writer().lock_future(redsync::context::timeout(30s));
        CHECK(wf.wait_for(300ms) == std::future_status::timeout);
        CHECK(a.reader().unlock(redsync::context::timeout(20s)).ok());
        CHECK(wf.wait_for(300ms) == std::future_status::timeout);
        const auto released = steady::now();
        CHECK(b.reader().unlock(redsync::context::timeout(20s)).ok());
        REQUIRE(wf.wait_for(20s) == std::future_status::ready);
        const auto got = wf.get();
        REQUIRE_MESSAGE(got.ok(), got.describe());
        CHECK(steady::now() - released < rw_slow_poll - 500ms);  // woken (SPUBLISH), not polled
        CHECK(w.writer().token() > b.reader().token());
        CHECK(a.reader().try_lock(redsync::context::timeout(20s)).is(redsync::errc::busy));
        CHECK(w.writer().unlock(redsync::context::timeout(20s)).ok());
      }
    }
  }
}
