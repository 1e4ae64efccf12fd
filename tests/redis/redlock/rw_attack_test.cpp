// Attacks on RWMutex (rw_mutex.hpp; lua/rw_*.lua), against real
// redis-servers, from the review of the first version. The first two
// showed defects of that version (they failed on it) and are fixed:
// rw_acquire.lua refuses a value already in the readers' set, and
// leave.lua wakes the readers a leaving writer stood in front of.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

using rwa_steady = std::chrono::steady_clock;

redsync::mutex_options rwa_quick(int tries = 3) {
  return {.tries = tries, .retry_delay = [](int) { return 20ms; }};
}

redsync::mutex_options rwa_waiting(std::chrono::milliseconds delay) {
  return {.expiry = 8s, .tries = redsync::unlimited_tries, .retry_delay = [delay](int) { return delay; }};
}

redsync::redsync_options rwa_nodes(redsync::script_mode mode = redsync::script_mode::eval) {
  redsync::redsync_options o = fresh_nodes();
  o.script_mode = mode;
  return o;
}

long long rwa_waiters(const redis_server& s, const std::string& name) {
  return redis_client(s).command({"ZCARD", name + ":redsync-line"}).integer;
}

}  // namespace

TEST_SUITE("rw_attack") {
  // Two writers with one fixed value exclude each other (SET NX refuses
  // even our own value), and so do two readers: one value is one member of
  // the readers' set, so a second reader with it would share the first
  // one's hold, and the first one's unlock would end both (the first
  // version let a writer in under the second reader that way).
  TEST_CASE(
      "two readers with one fixed value are one holder: the second is refused, so no writer gets in under "
      "it") {
    cluster c(3);
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      redsync::Redsync rs(c.uris(), rwa_nodes(mode));
      const auto name = unique_name("rw-fixed-value");
      redsync::mutex_options fixed = rwa_quick();
      fixed.expiry = 30s;
      fixed.value = "worker-7";

      // Writers: the second is refused.
      auto w1 = rs.new_rw_mutex(name, fixed);
      auto w2 = rs.new_rw_mutex(name, fixed);
      REQUIRE(w1.writer().lock(redsync::context::timeout(10s)).ok());
      CHECK_FALSE(w2.writer().try_lock(redsync::context::timeout(10s)).ok());
      w1.unlock();

      // Readers: the second is refused as well.
      auto r1 = rs.new_rw_mutex(name, fixed);
      auto r2 = rs.new_rw_mutex(name, fixed);
      REQUIRE(r1.reader().lock(redsync::context::timeout(10s)).ok());
      CHECK(r2.reader().try_lock(redsync::context::timeout(10s)).is(redsync::errc::busy));
      CHECK_FALSE(r2.reader().held());
      REQUIRE(r1.reader().unlock(redsync::context::timeout(10s)).ok());
      // Gone everywhere: a writer gets the name, and no reader holds.
      auto w = rs.new_rw_mutex(name, rwa_quick());
      REQUIRE(w.writer().try_lock(redsync::context::timeout(10s)).ok());
      w.unlock();

      // The same with a value_generator that returns a constant.
      redsync::mutex_options gen = rwa_quick();
      gen.expiry = 30s;
      gen.value_generator = [] { return std::string("constant"); };
      auto g1 = rs.new_rw_mutex(name, gen);
      auto g2 = rs.new_rw_mutex(name, gen);
      REQUIRE(g1.reader().lock(redsync::context::timeout(10s)).ok());
      CHECK(g2.reader().try_lock(redsync::context::timeout(10s)).is(redsync::errc::busy));
      g1.unlock_shared();
      auto w3 = rs.new_rw_mutex(name, rwa_quick());
      CHECK(w3.try_lock());
      w3.unlock();

      // A hold of the fixed value that ended without a release (its client
      // gone) does not refuse the value once expired, though another reader
      // keeps the set alive.
      redsync::mutex_options brief = rwa_quick();
      brief.expiry = 600ms;
      brief.value = "worker-9";
      auto other = rs.new_rw_mutex(name, rwa_quick());
      REQUIRE(other.reader().lock(redsync::context::timeout(10s)).ok());
      auto gone = rs.new_rw_mutex(name, brief);
      REQUIRE(gone.reader().lock(redsync::context::timeout(10s)).ok());
      for (std::size_t k = 0; k < c.size(); ++k) {
        // What the client would leave if it died now: its member, expiring.
        CHECK(redis_client(c[k]).command({"ZSCORE", name + ":redsync-readers", "\x01worker-9"}).type !=
              redis_client::reply::kind::nil);
      }
      std::this_thread::sleep_for(800ms);  // past its expiry on every node
      auto again = rs.new_rw_mutex(name, brief);
      CHECK(again.reader().lock(redsync::context::timeout(10s)).ok());
      again.unlock_shared();
      other.unlock_shared();
    }
  }

  // Readers hold; a writer waits at the head; readers queue behind it. The
  // writer gives up (its lock() times out) and leaves the line: the name is
  // open to the readers at once, but leave.lua's settle() returns on the
  // readers' mark (not a reservation) and publishes nothing, so they sit
  // until their next poll (up to behind_refresh_max = 1 s).
  TEST_CASE("a writer that leaves the line while readers hold wakes the readers behind it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rwa_nodes());
    const auto name = unique_name("rw-writer-leaves");
    auto holder = rs.new_rw_mutex(name, rwa_quick());
    REQUIRE(holder.reader().lock(redsync::context::timeout(10s)).ok());

    auto w = rs.new_rw_mutex(name, rwa_waiting(3s));
    rwa_steady::time_point writer_gave_up{};
    std::thread writer([&] {
      CHECK_FALSE(w.writer().lock(redsync::context::timeout(2500ms)).ok());
      writer_gave_up = rwa_steady::now();
    });
    REQUIRE(wait_until([&] { return rwa_waiters(c[0], name) == 1; }, 10s));

    constexpr int n = 3;
    std::vector<redsync::RWMutex> readers;
    for (int i = 0; i < n; ++i) readers.push_back(rs.new_rw_mutex(name, rwa_waiting(3s)));
    std::vector<rwa_steady::time_point> got(n);
    std::vector<std::thread> threads;
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        if (readers[i].reader().lock(redsync::context::timeout(20s)).ok()) got[i] = rwa_steady::now();
      });
    }
    REQUIRE(wait_until([&] { return rwa_waiters(c[0], name) == 1 + n; }, 10s));
    for (std::size_t k = 0; k < c.size(); ++k) redis_client(c[k]).reset_stats();
    writer.join();
    for (auto& t : threads) t.join();
    long long publishes = 0;
    for (std::size_t k = 0; k < c.size(); ++k) publishes += redis_client(c[k]).calls("publish");
    auto worst = 0ms;
    for (const auto& t : got) {
      REQUIRE(t != rwa_steady::time_point{});
      worst = std::max(worst, std::chrono::duration_cast<std::chrono::milliseconds>(t - writer_gave_up));
    }
    MESSAGE("readers got the name up to "
            << worst.count() << " ms after the writer gave up; wake-ups published: " << publishes);
    CHECK(publishes > 0);
    // The delay itself is the readers' poll phase (0..1 s): printed, not checked.
    for (auto& r : readers) r.unlock_shared();
    holder.unlock_shared();
  }

  // A writer's reservation outlives the writer (its lease ran out: a
  // crashed waiter). A writer arriving now takes the name at once
  // (acquire.lua drops the dead head before testing); a reader arriving now
  // is refused on its first attempt: rw_acquire.lua tests the reservation
  // it read before live_head() drops the dead writer, so it only retargets
  // the reservation to itself (quietly) and answers -2, and gets the name
  // on its next attempt, a retry delay (at most head_refresh) later.
  TEST_CASE("a reader that finds the name reserved for a dead writer takes it without a second retry") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rwa_nodes());
    const std::string reserved = std::string("\0redsync:next\0", 14);
    const auto plant = [&](const std::string& name) {
      for (std::size_t k = 0; k < c.size(); ++k) {
        redis_client rc(c[k]);
        rc.command({"SET", name, reserved + "dead-writer", "PX", "20000"});
        rc.command({"ZADD", name + ":redsync-line", "1", "dead-writer"});
        rc.command({"PEXPIRE", name + ":redsync-line", "20000"});
        rc.command({"HSET", name + ":redsync-leases", "dead-writer", "1"});  // ran out long ago
        rc.command({"PEXPIRE", name + ":redsync-leases", "20000"});
      }
    };
    const auto writer_name = unique_name("rw-dead-res-w");
    plant(writer_name);
    auto w = rs.new_rw_mutex(writer_name, rwa_waiting(3s));
    auto t0 = rwa_steady::now();
    REQUIRE(w.writer().lock(redsync::context::timeout(10s)).ok());
    const auto writer_took = std::chrono::duration_cast<std::chrono::milliseconds>(rwa_steady::now() - t0);
    w.unlock();

    const auto reader_name = unique_name("rw-dead-res-r");
    plant(reader_name);
    auto r = rs.new_rw_mutex(reader_name, rwa_waiting(3s));
    t0 = rwa_steady::now();
    REQUIRE(r.reader().lock(redsync::context::timeout(10s)).ok());
    const auto reader_took = std::chrono::duration_cast<std::chrono::milliseconds>(rwa_steady::now() - t0);
    r.unlock_shared();
    MESSAGE("writer took " << writer_took.count() << " ms, reader took " << reader_took.count() << " ms");
    CHECK(reader_took < 1500ms);  // its first attempt: a second waits the 3 s retry delay
  }

  // The readers' key on a Redis Cluster: NAME's keys take the hash tag
  // {NAME}, and the readers' set must share its slot (CROSSSLOT otherwise).
  TEST_CASE("readers and writers on a real Redis Cluster, both script modes") {
    redis_cluster cl(cluster_config{.masters = 3});
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      redsync::Redsync rs(std::vector<std::string>{cl.uri()}, rwa_nodes(mode));
      for (const auto& name :
           {unique_name("rw-cl"), unique_name("rw-cl") + "{tag}", std::string("}") + unique_name("x")}) {
        CAPTURE(name);
        auto a = rs.new_rw_mutex(name, rwa_quick());
        auto b = rs.new_rw_mutex(name, rwa_quick());
        REQUIRE(a.reader().lock(redsync::context::timeout(10s)).ok());
        REQUIRE(b.reader().lock(redsync::context::timeout(10s)).ok());
        CHECK(a.reader().valid(redsync::context::timeout(10s)).ok());
        CHECK(b.reader().extend(redsync::context::timeout(10s)).ok());
        auto w = rs.new_rw_mutex(name, rwa_quick());
        CHECK_FALSE(w.try_lock());
        a.unlock_shared();
        CHECK_FALSE(w.try_lock());
        REQUIRE(b.reader().unlock(redsync::context::timeout(10s)).ok());
        REQUIRE(w.writer().lock(redsync::context::timeout(10s)).ok());
        CHECK(w.writer().token() > a.reader().token());
        CHECK(w.writer().token() > b.reader().token());
        CHECK(a.reader().try_lock(redsync::context::timeout(10s)).is(redsync::errc::busy));
        w.unlock();
      }
    }
  }

  // Readers and writers hammer one name from several threads: no writer
  // ever overlaps anyone, every writer's token is above every hold that
  // ended before it asked, and nothing is left without a TTL.
  TEST_CASE("random readers and writers: exclusion, tokens, nothing left behind") {
    cluster c(3);
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      redsync::Redsync rs(c.uris(), rwa_nodes(mode));
      const auto name = unique_name("rw-stress");
      std::atomic<int> readers_in{0}, writers_in{0}, bad{0}, token_bad{0}, reads{0}, writes{0};
      std::atomic<std::uint64_t> done_max{0};
      const auto until = rwa_steady::now() + 6s;
      std::vector<std::thread> ts;
      for (int k = 0; k < 6; ++k) {
        ts.emplace_back([&, k] {
          std::mt19937 rng(k * 7919 + static_cast<int>(mode));
          auto m = rs.new_rw_mutex(
              name,
              {.expiry = 5s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 30ms; }});
          while (rwa_steady::now() < until) {
            const bool write = k < 2 || rng() % 4 == 0;
            auto& h = write ? m.writer() : m.reader();
            const std::uint64_t before = done_max.load();
            if (!h.lock(redsync::context::timeout(8s)).ok()) continue;
            if (write) {
              if (++writers_in != 1 || readers_in.load() != 0) ++bad;
              if (h.token().value <= before) ++token_bad;
              ++writes;
            } else {
              ++readers_in;
              if (writers_in.load() != 0) ++bad;
              ++reads;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 15));
            if (!h.held()) ++bad;  // validity ran out: the counts above mean nothing
            std::uint64_t t = h.token().value, cur = done_max.load();
            while (t > cur && !done_max.compare_exchange_weak(cur, t)) {
            }
            if (write)
              --writers_in;
            else
              --readers_in;
            h.unlock(redsync::context::timeout(8s));
          }
        });
      }
      for (auto& t : ts) t.join();
      MESSAGE("reads " << reads.load() << ", writes " << writes.load() << ", overlaps " << bad.load()
                       << ", token faults " << token_bad.load());
      CHECK(bad == 0);
      CHECK(token_bad == 0);
      CHECK(reads > 10);
      CHECK(writes > 10);
      for (std::size_t k = 0; k < c.size(); ++k) {
        redis_client rc(c[k]);
        for (const auto& key :
             {name, name + ":redsync-readers", name + ":redsync-line", name + ":redsync-leases"}) {
          CAPTURE(key);
          CHECK(rc.pttl(key) != -1);  // never a key without expiry
        }
      }
    }
  }

  // The readers' wake-up chain (the writer's release wakes the head reader,
  // whose grant wakes the readers queued up to the next writer) on a real
  // Redis Cluster (SPUBLISH, rw_cluster_publish) and in functions mode: with
  // a 3 s retry delay the queued readers poll once a second, so all of them
  // holding within 400 ms of the release means they were woken.
  TEST_CASE("queued readers are woken in a chain on a Redis Cluster and in functions mode") {
    redis_cluster cl(cluster_config{.masters = 3});
    cluster c(3);
    struct setup {
      std::vector<std::string> uris;
      redsync::script_mode mode;
    };
    for (const auto& s :
         {setup{{cl.uri()}, redsync::script_mode::eval}, setup{{cl.uri()}, redsync::script_mode::functions},
          setup{c.uris(), redsync::script_mode::functions}}) {
      CAPTURE(s.uris.front());
      CAPTURE(static_cast<int>(s.mode));
      redsync::Redsync rs(s.uris, rwa_nodes(s.mode));
      const auto name = unique_name("rw-chain");
      auto w = rs.new_rw_mutex(name, rwa_quick());
      REQUIRE(w.writer().lock(redsync::context::timeout(10s)).ok());
      constexpr int n = 4;
      std::vector<redsync::RWMutex> readers;
      for (int i = 0; i < n; ++i) readers.push_back(rs.new_rw_mutex(name, rwa_waiting(3s)));
      std::vector<rwa_steady::time_point> got(n);
      std::atomic<int> queued{0};
      std::vector<std::thread> ts;
      for (int i = 0; i < n; ++i) {
        ts.emplace_back([&, i] {
          ++queued;
          if (readers[i].reader().lock(redsync::context::timeout(20s)).ok()) got[i] = rwa_steady::now();
        });
      }
      // Every reader has had its first (refused) attempt.
      REQUIRE(wait_until([&] { return queued.load() == n; }, 5s));
      std::this_thread::sleep_for(1500ms);
      const auto released = rwa_steady::now();
      w.unlock();
      for (auto& t : ts) t.join();
      auto worst = 0ms;
      for (const auto& t : got) {
        REQUIRE(t != rwa_steady::time_point{});
        worst = std::max(worst, std::chrono::duration_cast<std::chrono::milliseconds>(t - released));
      }
      MESSAGE("all readers held " << worst.count() << " ms after the writer's release");
      CHECK(worst < 1500ms);  // woken, not polled (3 s)
      for (auto& r : readers) r.unlock_shared();
    }
  }

  // As review_test's mutex case, for readers: over maxmemory (noeviction) a
  // reader can still extend and let go, the non-last one (whose release
  // re-SETs the mark: a command that may grow memory) included.
  TEST_CASE("readers over maxmemory still extend and let go, in either script mode") {
    for (const auto mode : {redsync::script_mode::eval, redsync::script_mode::functions}) {
      CAPTURE(static_cast<int>(mode));
      cluster c(3);
      redsync::Redsync rs(c.uris(), rwa_nodes(mode));
      const auto name = unique_name("rw-oom");
      auto r1 = rs.new_rw_mutex(name, rwa_quick(1));
      auto r2 = rs.new_rw_mutex(name, rwa_quick(1));
      // Load every script and library first.
      REQUIRE(r1.reader().lock(redsync::context::timeout(5s)).ok());
      REQUIRE(r1.reader().extend().ok());
      REQUIRE(r1.reader().valid().ok());
      REQUIRE(r1.reader().unlock(redsync::context::timeout(5s)).ok());
      REQUIRE(r1.reader().lock(redsync::context::timeout(5s)).ok());
      REQUIRE(r2.reader().lock(redsync::context::timeout(5s)).ok());
      for (std::size_t i = 0; i < c.size(); ++i)
        REQUIRE(redis_client(c[i]).command({"CONFIG", "SET", "maxmemory", "1"}).str == "OK");
      auto e1 = r1.reader().extend();
      CHECK_MESSAGE(e1.ok(), e1.describe());
      auto v1 = r1.reader().valid();
      CHECK_MESSAGE(v1.ok(), v1.describe());
      auto u1 = r1.reader().unlock(redsync::context::timeout(5s));
      CHECK_MESSAGE(u1.ok(), u1.describe());
      auto u2 = r2.reader().unlock(redsync::context::timeout(5s));
      CHECK_MESSAGE(u2.ok(), u2.describe());
      for (std::size_t i = 0; i < c.size(); ++i) {
        CHECK_FALSE(redis_client(c[i]).exists(name));
        CHECK_FALSE(redis_client(c[i]).exists(name + ":redsync-readers"));
        redis_client(c[i]).command({"CONFIG", "SET", "maxmemory", "0"});
      }
    }
  }

  // A multi-name Mutex that includes the name is a writer too, both ways,
  // and a waiting one is served after the readers let go.
  TEST_CASE("a multi-name Mutex over the name excludes readers both ways") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rwa_nodes());
    const auto name = unique_name("rw-multi");
    const auto other = unique_name("rw-multi-other");
    auto r = rs.new_rw_mutex(name, rwa_quick());
    REQUIRE(r.reader().lock(redsync::context::timeout(10s)).ok());
    auto m = rs.new_multi_mutex({other, name}, rwa_quick());
    CHECK(m.try_lock(redsync::context::timeout(10s)).is(redsync::errc::busy));
    CHECK_FALSE(redis_client(c[0]).exists(other));  // all or nothing
    auto waiter = rs.new_multi_mutex({other, name}, rwa_waiting(3s));
    auto fut = waiter.lock_future(redsync::context::timeout(10s));
    REQUIRE(wait_until([&] { return rwa_waiters(c[0], name) == 1; }, 5s));
    const auto released = rwa_steady::now();
    r.unlock_shared();
    REQUIRE(fut.get().ok());
    CHECK(rwa_steady::now() - released < 2s);  // woken, not polled (3 s)
    CHECK(waiter.token() > r.reader().token());
    auto r2 = rs.new_rw_mutex(name, rwa_quick());
    CHECK(r2.reader().try_lock(redsync::context::timeout(10s)).is(redsync::errc::busy));
    waiter.unlock();
    CHECK(r2.reader().try_lock(redsync::context::timeout(10s)).ok());
    r2.unlock_shared();
  }

  // A stream of overlapping readers (the name never drains by itself): a
  // writer that asks is served after the readers ahead of it, not starved.
  TEST_CASE("a writer is not starved by a stream of overlapping readers") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rwa_nodes());
    const auto name = unique_name("rw-stream");
    std::atomic<bool> stop{false};
    std::atomic<int> reads{0};
    std::vector<std::thread> ts;
    for (int k = 0; k < 4; ++k) {
      ts.emplace_back([&, k] {
        auto m = rs.new_rw_mutex(name, rwa_waiting(50ms));
        std::this_thread::sleep_for(std::chrono::milliseconds(k * 60));
        while (!stop) {
          if (!m.reader().lock(redsync::context::timeout(10s)).ok()) continue;
          ++reads;
          std::this_thread::sleep_for(250ms);
          m.reader().unlock(redsync::context::timeout(10s));
        }
      });
    }
    REQUIRE(wait_until([&] { return reads.load() >= 8; }, 10s));
    auto w = rs.new_rw_mutex(name, rwa_waiting(50ms));
    const auto asked = rwa_steady::now();
    const auto got = w.writer().lock(redsync::context::timeout(5s));
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(rwa_steady::now() - asked);
    MESSAGE("writer: " << got.describe() << " after " << took.count() << " ms");
    CHECK(got.ok());
    CHECK(took < 3s);  // starved, it would wait out its 5 s context
    if (got.ok()) w.unlock();
    stop = true;
    for (auto& t : ts) t.join();
  }

  // The other way: writers that re-lock at once do not starve a reader.
  TEST_CASE("a reader is not starved by writers that re-lock at once") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), rwa_nodes());
    const auto name = unique_name("rw-wstream");
    std::atomic<bool> stop{false};
    std::atomic<int> writes{0};
    std::vector<std::thread> ts;
    for (int k = 0; k < 3; ++k) {
      ts.emplace_back([&] {
        auto m = rs.new_rw_mutex(name, rwa_waiting(50ms));
        while (!stop) {
          if (!m.writer().lock(redsync::context::timeout(10s)).ok()) continue;
          ++writes;
          std::this_thread::sleep_for(100ms);
          m.writer().unlock(redsync::context::timeout(10s));
        }
      });
    }
    REQUIRE(wait_until([&] { return writes.load() >= 6; }, 10s));
    auto r = rs.new_rw_mutex(name, rwa_waiting(50ms));
    const auto asked = rwa_steady::now();
    const auto got = r.reader().lock(redsync::context::timeout(5s));
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(rwa_steady::now() - asked);
    MESSAGE("reader: " << got.describe() << " after " << took.count() << " ms");
    CHECK(got.ok());
    CHECK(took < 3s);  // starved, it would wait out its 5 s context
    if (got.ok()) r.unlock_shared();
    stop = true;
    for (auto& t : ts) t.join();
  }
}
