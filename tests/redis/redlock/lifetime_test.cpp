// Lifetimes and local state: what a Mutex leaves behind when it, or its
// Redsync, goes away; what held() says after an unlock that failed or a lock
// that was lost; releases that could not be sent at first.

#include "app_loop.hpp"
#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <uv.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// Connects every node's pool, so later steps are about the nodes, not about
// connecting.
void warm_up(redsync::Redsync& rs) {
  auto warm = rs.new_mutex(unique_name("warm"));
  REQUIRE(warm.lock(redsync::context{}).ok());
  REQUIRE(warm.unlock(redsync::context{}).ok());
}

// A TCP connection that just sits in a server's accept queue.
struct raw_connection {
  int fd = -1;
  explicit raw_connection(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~raw_connection() {
    if (fd >= 0) ::close(fd);
  }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;
};

}  // namespace

TEST_SUITE("lifetime") {
  TEST_CASE("a Mutex destroyed while holding, then its Redsync, leaves no key on any node") {
    cluster c(3);
    const auto name = unique_name("natural-order");
    {
      redsync::Redsync rs(c.uris(), fresh_nodes());
      auto m = rs.new_mutex(name, {.expiry = 30s});
      REQUIRE(m.lock(redsync::context{}).ok());
      REQUIRE(redis_client(c[0]).exists(name));
    }  // m first, then rs: the release must go out before rs is gone
    CHECK(absent_on(c, name, {0, 1, 2}));
  }

  TEST_CASE("an acquisition abandoned at shutdown is released before the Redsync is gone, within the bound") {
    cluster c(3);
    const auto name = unique_name("abandoned");
    std::optional<redsync::Redsync> rs(std::in_place, c.uris(), fresh_nodes({.shutdown_timeout = 500ms}));
    warm_up(*rs);
    c[0].pause();
    c[1].pause();
    // 60 s * 0.1 = a 6 s command timeout: the attempt waits on the frozen
    // nodes while node 2 already holds our SET.
    std::optional<redsync::Mutex> m(rs->new_mutex(name, {.expiry = 60s, .timeout_factor = 0.1}));
    auto f = m->lock_future();
    REQUIRE(wait_until([&] { return redis_client(c[2]).exists(name); }, 3s));
    m.reset();
    const auto t0 = clock_type::now();
    rs.reset();
    const auto took = clock_type::now() - t0;
    CHECK(took < 3s);  // bounded by shutdown_timeout, not by the 6 s command timeout
    REQUIRE(f.wait_for(0s) == std::future_status::ready);
    CHECK(f.get().error == redsync::errc::shutting_down);
    CHECK_FALSE(redis_client(c[2]).exists(name));
    // The frozen nodes run the SET and then its release, in that order.
    c[0].resume();
    c[1].resume();
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2}); }, 3s));
  }

  TEST_CASE("shutdown_timeout is validated and named in the message") {
    std::string message;
    try {
      redsync::Redsync rs({"redis://127.0.0.1:1"}, {.shutdown_timeout = -1ms});
    } catch (const redsync::config_error& e) {
      message = e.what();
    }
    CHECK(message.find("shutdown_timeout = -1") != std::string::npos);
  }

  TEST_CASE(
      "after an unlock that misses its quorum, held() is false, unlock can be repeated and lock takes a new "
      "value") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    warm_up(rs);
    const auto name = unique_name("unlock-no-quorum");
    auto m = rs.new_mutex(name, {.expiry = 10s, .timeout_factor = 0.02});  // 200 ms timeout
    REQUIRE(m.lock(redsync::context{}).ok());
    const auto old = m.value();
    c[0].pause();
    c[1].pause();
    auto r = m.unlock(redsync::context{});
    CHECK(r.error == redsync::errc::no_quorum);
    CHECK_FALSE(m.held());
    // The old value's keys may still be on the frozen nodes: a second unlock
    // still sends their release.
    auto again = m.unlock(redsync::context{});
    CHECK(again.error == redsync::errc::no_quorum);
    CHECK(again.nodes[0].status == redsync::node_status::timeout);
    c[0].resume();
    c[1].resume();
    auto l = m.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(l.ok(), l.describe());
    CHECK(m.value() != old);
    CHECK(m.held());
    CHECK(m.unlock(redsync::context{}).ok());
    CHECK(m.unlock(redsync::context{}).error == redsync::errc::not_held);
  }

  TEST_CASE("an unlock whose token was stopped before the call still releases on every node") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("unlock-stopped");
    auto m = rs.new_mutex(name, {.expiry = 30s});
    REQUIRE(m.lock(redsync::context{}).ok());
    std::stop_source stop;
    stop.request_stop();
    auto r = m.unlock(redsync::context::cancellable(stop.get_token()));
    CHECK(r.error == redsync::errc::cancelled);
    CHECK_FALSE(m.held());
    // Without the release the keys would stay for the whole 30 s expiry.
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2}); }, 3s));
    auto other = rs.new_mutex(name);
    CHECK(other.try_lock(redsync::context{}).ok());
  }

  TEST_CASE("an unlock whose token was stopped before the call stops auto-extension and the keys expire") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("unlock-stopped-extending");
    auto m = rs.new_mutex(name, {.expiry = 1s, .auto_extend = true});
    REQUIRE(m.lock(redsync::context{}).ok());
    std::stop_source stop;
    stop.request_stop();
    CHECK(m.unlock(redsync::context::cancellable(stop.get_token())).error == redsync::errc::cancelled);
    // A watchdog still running would keep the keys for as long as it runs.
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2}); }, 3s));
    CHECK_FALSE(m.held());
    CHECK(m.lock(redsync::context::timeout(5s)).ok());
  }

  TEST_CASE("after an unlock that runs out of time, held() is false and the next lock acquires") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    warm_up(rs);
    const auto name = unique_name("unlock-deadline");
    auto m = rs.new_mutex(name, {.expiry = 10s, .timeout_factor = 0.1});  // 1 s timeout
    REQUIRE(m.lock(redsync::context{}).ok());
    c[0].pause();
    c[1].pause();
    auto r = m.unlock(redsync::context::timeout(50ms));
    CHECK(r.error == redsync::errc::deadline_exceeded);
    CHECK_FALSE(m.held());
    c[0].resume();
    c[1].resume();
    // The release went out before the deadline was looked at.
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2}); }, 3s));
    auto l = m.lock(redsync::context::timeout(5s));
    CHECK_MESSAGE(l.ok(), l.describe());
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE(
      "an automatic extension that succeeds after the loss was reported neither re-sets held nor keeps the "
      "keys") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("late-extension");
    std::atomic<int> lost{0};
    // Command timeout 4 s * 0.6 = 2.4 s; the loss is declared at the latest
    // at until - margin (~3.9 s), while an extension is still in flight.
    auto m = rs.new_mutex(name, {.expiry = 4s,
                                 .timeout_factor = 0.6,
                                 .auto_extend = true,
                                 .auto_extend_interval = 1s,
                                 .on_lost = [&](const redsync::result&) { ++lost; }});
    REQUIRE(m.lock(redsync::context{}).ok());
    c[2].pause();
    // A check that waits 2.4 s for the frozen node: the extension due at 1 s
    // queues behind it, starts at ~2.4 s and waits for the frozen node too.
    std::thread check([&] { (void)m.valid(); });
    REQUIRE(wait_until([&] { return lost.load() > 0; }, 8s));
    CHECK_FALSE(m.held());
    c[2].resume();  // the extension now completes, on all three nodes
    check.join();
    (void)m.valid();  // queued behind the extension: it has completed by now
    CHECK(m.lost());
    CHECK_FALSE(m.held());
    // The keys the late extension re-armed are released (not awaited by
    // valid(), so give it a bound).
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2}); }, 3s));
    CHECK(m.extend().error == redsync::errc::lost);
    CHECK(lost.load() == 1);
  }

  TEST_CASE("cancellation racing completion: every call ends exactly once and leaves no key") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("cancel-race");
    auto m = rs.new_mutex(name, {.expiry = 5s, .tries = 1});
    std::atomic<int> callbacks{0};
    constexpr int rounds = 200;
    for (int i = 0; i < rounds; ++i) {
      std::stop_source stop;
      auto done = std::make_shared<std::promise<redsync::result>>();
      auto f = done->get_future();
      m.try_lock_async(redsync::context::cancellable(stop.get_token()),
                       [done, &callbacks](redsync::result r) {
                         ++callbacks;
                         done->set_value(std::move(r));
                       });
      // Cancel at once, a little later, or only after the call ended (then
      // nothing orders the caller's registration of the stop callback
      // before the loop's removal of it: the race TSan must see).
      if (i % 3 == 1) {
        for (int spin = 0; spin < (i % 8) * 2000; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);
      } else if (i % 3 == 2) {
        REQUIRE(f.wait_for(5s) == std::future_status::ready);
      }
      stop.request_stop();
      REQUIRE(f.wait_for(5s) == std::future_status::ready);
      const auto r = f.get();
      CHECK((r.ok() || r.error == redsync::errc::cancelled));
      if (r.ok()) REQUIRE(m.unlock(redsync::context{}).ok());
    }
    CHECK(callbacks.load() == rounds);
    CHECK(wait_until([&] { return absent_on(c, name, {0, 1, 2}); }, 3s));

    // The tightest race: an unlock of a mutex that holds nothing ends on the
    // loop as soon as it runs, while the caller is still registering its
    // stop callback right after handing the call over.
    auto idle = rs.new_mutex(unique_name("cancel-race-idle"));
    std::atomic<int> ended{0};
    constexpr int quick_rounds = 2000;
    for (int i = 0; i < quick_rounds; ++i) {
      std::stop_source stop;
      idle.unlock_async(redsync::context::cancellable(stop.get_token()),
                        [&ended](redsync::result r) { ended += r.error == redsync::errc::not_held; });
      if (i % 2) stop.request_stop();
    }
    CHECK(wait_until([&] { return ended.load() == quick_rounds; }, 10s));
  }

  TEST_CASE("a release that could not be sent to a frozen node is retried and removes the key it left") {
    // Node 0 accepts one pending connection while frozen (tcp-backlog 0): a
    // filler takes that place, so reconnecting to it fails.
    redis_server frozen({.extra_args = {"--tcp-backlog", "0"}});
    cluster c(2);
    std::vector<std::string> uris{frozen.uri(), c[0].uri(), c[1].uri()};
    redsync::Redsync rs(
        uris, fresh_nodes(
                  {.connect_timeout = 300ms, .reconnect_backoff_min = 20ms, .reconnect_backoff_max = 100ms}));
    warm_up(rs);
    const auto name = unique_name("release-retry");
    // 20 s * 0.005 = 100 ms timeout, so the connection's stall limit is its
    // 5 s minimum.
    auto m = rs.new_mutex(name, {.expiry = 20s, .timeout_factor = 0.005});
    frozen.pause();
    raw_connection filler(frozen.port());
    REQUIRE(filler.fd >= 0);
    REQUIRE(m.lock(redsync::context{}).ok());  // our SET waits in node 0's socket
    // Past the stall limit the pool drops that connection and cannot make a
    // new one: node 0 turns from timing out to unreachable.
    REQUIRE(wait_until([&] { return m.valid().nodes[0].status == redsync::node_status::unreachable; }, 12s));
    REQUIRE(m.unlock(redsync::context{}).ok());  // nodes 1 and 2; node 0 is not reached
    frozen.resume();                             // runs the buffered SET: the key is back on node 0 for 20 s
    ::close(filler.fd);
    filler.fd = -1;
    CHECK(wait_until([&] { return !redis_client(frozen).exists(name); }, 5s));
  }

  TEST_CASE(
      "a Redsync destroyed on its application-owned loop's thread mid-round survives the answers and the "
      "failures that arrive after it is gone, and leaves no key") {
    // The engine returns from its destructor at once on its own loop's
    // thread; the pools drain afterwards, so a frozen node's answer to the
    // round in flight arrives after the engine is gone (run under ASan:
    // the round must not touch it). Frozen past the drain's bound, the
    // node's connection is closed instead, and the abandon's release to it
    // fails after the engine is gone: the release sender must not touch the
    // engine either (it read `shutting_down` from it: found by reading).
    for (const bool frozen_past_drain : {false, true}) {
      CAPTURE(frozen_past_drain);
      cluster c(3);
      app_loop app;

      const auto name = unique_name("destroyed-on-loop");
      std::optional<redsync::Redsync> rs;
      // Made before the loop runs: libuv handles are created on the loop's
      // thread or while nobody runs it.
      const auto drain_bound = frozen_past_drain ? 300ms : 3000ms;
      rs.emplace(c.uris(), fresh_nodes({.loop = app.get(), .shutdown_timeout = drain_bound}));
      app.run();
      const auto expiry = 4s;
      auto m = std::make_unique<redsync::Mutex>(rs->new_mutex(name, {.expiry = expiry, .tries = 1}));
      {
        // Every node's record is surveyed first, so the round below goes out.
        auto warm = rs->new_mutex(unique_name("destroyed-on-loop-warm"));
        REQUIRE(warm.lock(redsync::context::timeout(5s)).ok());
        REQUIRE(warm.unlock(redsync::context::timeout(5s)).ok());
      }
      c[2].pause();
      std::promise<redsync::result> answered;
      m->lock_async(redsync::context{}, [&](redsync::result r) { answered.set_value(std::move(r)); });
      // Nodes 0 and 1 answer, node 2 is frozen: the round waits for it.
      REQUIRE(
          wait_until([&] { return redis_client(c[0]).exists(name) && redis_client(c[1]).exists(name); }, 3s));
      // Destroy the Mutex and the Redsync on the loop's own thread.
      REQUIRE(app.reset(3s, m, rs));
      auto f = answered.get_future();
      if (frozen_past_drain) {
        // The drain gives up on node 2 and its connection is closed: the
        // round's send and the release fail after the engine is gone.
        std::this_thread::sleep_for(drain_bound + 1s);
        CHECK(f.wait_for(0s) == std::future_status::ready);
      }
      // Node 2 wakes: its answer to the acquisition, then the release, arrive
      // while the pools drain, after the engine is gone (or, past the bound,
      // it runs the SET from its closed socket: that key expires).
      c[2].resume();
      REQUIRE(f.wait_for(5s) == std::future_status::ready);
      CHECK_FALSE(f.get().ok());
      for (std::size_t i = 0; i < c.size(); ++i)
        CHECK_MESSAGE(wait_until([&] { return !redis_client(c[i]).exists(name); },
                                 i == 2 && frozen_past_drain ? expiry + 5s : 5s),
                      "node ", i);

      CHECK(app.stop(10s));  // nothing of the Redsync's is left on the loop
    }
  }

}  // TEST_SUITE
