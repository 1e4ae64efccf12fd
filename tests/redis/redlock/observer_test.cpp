// Observing a Redsync: the observer's events, the counters of stats() and the
// log hook, against real servers that are killed, restarted, flushed and
// robbed of their keys.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace redsync::test {
// The library's threshold (lib/redlock/telemetry.hpp), as documented.
constexpr std::uint64_t storm_reconnects = 5;
}  // namespace redsync::test

namespace {

// Copies of what the observer and the log hook heard, readable from the
// test's thread.
struct recorder : redsync::observer {
  struct call {
    std::string kind;  // acquire, release, extend, lost
    std::vector<std::string> names;
    std::error_code error;
    int attempts = 0;
    std::size_t nodes = 0;
    std::uint64_t token = 0;
    bool flag = false;  // blocking (acquire) or automatic (extend)
    std::thread::id thread;
  };
  struct node_change {
    std::size_t node = 0;
    std::string address;
    redsync::node_state state{};
    std::string detail;
  };

  mutable std::mutex mu;
  std::vector<call> calls;
  std::vector<node_change> nodes;
  std::vector<std::pair<redsync::log_level, std::string>> logs;

  void add(std::string kind, std::span<const std::string> names, const redsync::result& r,
           std::uint64_t token, bool flag) {
    std::lock_guard lk(mu);
    calls.push_back({std::move(kind),
                     {names.begin(), names.end()},
                     r.error,
                     r.attempts,
                     r.nodes.size(),
                     token,
                     flag,
                     std::this_thread::get_id()});
  }
  void on_acquire(const redsync::acquire_event& e) override {
    add("acquire", e.names, e.outcome, e.token.value, e.blocking);
  }
  void on_release(const redsync::release_event& e) override { add("release", e.names, e.outcome, 0, false); }
  void on_extend(const redsync::extend_event& e) override {
    add("extend", e.names, e.outcome, 0, e.automatic);
  }
  void on_lost(const redsync::lost_event& e) override { add("lost", e.names, e.outcome, 0, false); }
  void on_node(const redsync::node_event& e) override {
    std::lock_guard lk(mu);
    nodes.push_back({e.node, std::string(e.address), e.state, std::string(e.detail)});
  }

  redsync::log_hook hook() {
    return [this](redsync::log_level l, std::string_view m) {
      std::lock_guard lk(mu);
      logs.emplace_back(l, std::string(m));
    };
  }

  std::vector<call> calls_of(const std::string& kind) const {
    std::lock_guard lk(mu);
    std::vector<call> out;
    for (const auto& c : calls) {
      if (c.kind == kind) out.push_back(c);
    }
    return out;
  }
  // Index of the first change of node i to state s after position `from`, or -1.
  long find_node(std::size_t i, redsync::node_state s, std::size_t from = 0) const {
    std::lock_guard lk(mu);
    for (std::size_t k = from; k < nodes.size(); ++k) {
      if (nodes[k].node == i && nodes[k].state == s) return static_cast<long>(k);
    }
    return -1;
  }
  std::size_t node_changes() const {
    std::lock_guard lk(mu);
    return nodes.size();
  }
  bool logged(redsync::log_level l, const std::string& part) const {
    std::lock_guard lk(mu);
    for (const auto& [level, text] : logs) {
      if (level == l && text.find(part) != std::string::npos) return true;
    }
    return false;
  }
};

redsync::redsync_options observed(const std::shared_ptr<recorder>& rec,
                                  redsync::redsync_options o = fresh_nodes()) {
  o.observer = rec;
  o.log = rec->hook();
  return o;
}

std::uint64_t answers(const redsync::stats_snapshot& s, redsync::node_status st) {
  std::uint64_t n = 0;
  for (const auto& node : s.nodes) n += node.answers_with(st);
  return n;
}

}  // namespace

TEST_SUITE("observer") {
  TEST_CASE("the observer hears each acquisition, extension and release, and stats() counts them") {
    cluster c(5);
    auto rec = std::make_shared<recorder>();
    redsync::Redsync rs(c.uris(), observed(rec));
    const auto name = unique_name("obs:calls");
    auto m = rs.new_mutex(name, {.expiry = 2s});
    auto other = rs.new_mutex(name, {.expiry = 2s});

    REQUIRE(m.lock(redsync::context::timeout(5s)));
    REQUIRE(m.extend());
    const auto busy = other.try_lock(redsync::context::timeout(5s));
    REQUIRE(busy.busy());
    REQUIRE(m.unlock(redsync::context::timeout(5s)));

    const auto acquires = rec->calls_of("acquire");
    REQUIRE(acquires.size() == 2);
    CHECK(acquires[0].names == std::vector<std::string>{name});
    CHECK_FALSE(acquires[0].error);
    CHECK(acquires[0].flag);  // lock() is blocking
    CHECK(acquires[0].attempts >= 1);
    CHECK(acquires[0].nodes == 5);
    CHECK(acquires[0].token == m.token().value);
    CHECK(acquires[0].token > 0);
    CHECK(acquires[1].error == redsync::errc::busy);
    CHECK_FALSE(acquires[1].flag);  // try_lock
    CHECK(acquires[1].token == 0);
    const auto extends = rec->calls_of("extend");
    REQUIRE(extends.size() == 1);
    CHECK_FALSE(extends[0].error);
    CHECK_FALSE(extends[0].flag);
    const auto releases = rec->calls_of("release");
    REQUIRE(releases.size() == 1);
    CHECK_FALSE(releases[0].error);

    const auto s = rs.stats();
    CHECK(s.acquisitions.ok == 1);
    CHECK(s.acquisitions.failures(redsync::errc::busy) == 1);
    CHECK(s.acquisitions.total_failures() == 1);
    CHECK(s.extensions.ok == 1);
    CHECK(s.releases.ok == 1);
    CHECK(s.lost_locks == 0);
    CHECK(s.observer_errors == 0);
    REQUIRE(s.nodes.size() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
      CHECK(s.nodes[i].address == c[i].address());
      CHECK(s.nodes[i].connected);
      CHECK_FALSE(s.nodes[i].excluded);
      // lock, extend and unlock said ok; try_lock found the key taken.
      CHECK(s.nodes[i].answers_with(redsync::node_status::ok) >= 3);
      CHECK(s.nodes[i].answers_with(redsync::node_status::taken) == 1);
      CHECK(s.nodes[i].errors() == 0);
      std::uint64_t all = 0;
      for (const auto a : s.nodes[i].answers) all += a;
      CHECK(s.nodes[i].latency.count() == all);
      CHECK(s.nodes[i].latency.sum > 0us);
    }
    // Each node connected once, and said so.
    for (std::size_t i = 0; i < 5; ++i) CHECK(rec->find_node(i, redsync::node_state::connected) >= 0);
  }

  TEST_CASE("a node killed with -9 is reported unreachable, then reconnected after its restart") {
    cluster c(5);
    auto rec = std::make_shared<recorder>();
    redsync::Redsync rs(c.uris(), observed(rec));
    auto m = rs.new_mutex(unique_name("obs:kill"), {.expiry = 2s});
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    REQUIRE(m.unlock(redsync::context::timeout(5s)));

    c[1].kill();
    // 4 of 5 still make a quorum; the first call may only find the dropped
    // connection, the next one's connect is refused.
    CHECK(wait_until(
        [&] {
          if (m.lock(redsync::context::timeout(5s))) (void)m.unlock(redsync::context::timeout(5s));
          return rec->find_node(1, redsync::node_state::unreachable) >= 0;
        },
        5s));
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    REQUIRE(m.unlock(redsync::context::timeout(5s)));
    const long down = rec->find_node(1, redsync::node_state::unreachable);
    {
      std::lock_guard lk(rec->mu);
      REQUIRE(down >= 0);
      CHECK(rec->nodes[static_cast<std::size_t>(down)].address == c[1].address());
      CHECK_FALSE(rec->nodes[static_cast<std::size_t>(down)].detail.empty());  // the connect error
    }
    CHECK(rec->logged(redsync::log_level::warning, c[1].address() + " unreachable"));
    auto s = rs.stats();
    CHECK(s.nodes[1].unreachable == 1);
    CHECK_FALSE(s.nodes[1].connected);
    CHECK(s.nodes[1].answers_with(redsync::node_status::unreachable) >= 1);
    // Answers that failed without a round trip are not latencies.
    std::uint64_t answered = 0;
    for (const auto a : s.nodes[1].answers) answered += a;
    CHECK(s.nodes[1].latency.count() ==
          answered - s.nodes[1].answers_with(redsync::node_status::unreachable));

    c[1].restart();
    // The next calls reconnect once the backoff allows (at most 1 s).
    CHECK(wait_until(
        [&] {
          (void)m.try_lock(redsync::context::timeout(2s));
          (void)m.unlock(redsync::context::timeout(2s));
          return rec->find_node(1, redsync::node_state::reconnected, static_cast<std::size_t>(down)) >= 0;
        },
        10s));
    s = rs.stats();
    CHECK(s.nodes[1].connected);
    CHECK(s.nodes[1].reconnects == 1);
    CHECK(s.nodes[1].unreachable == 1);
  }

  TEST_CASE(
      "a node killed while nothing is sent to it is reported unreachable at once, not at the next call") {
    cluster c(3);
    auto rec = std::make_shared<recorder>();
    redsync::Redsync rs(c.uris(), observed(rec));
    auto m = rs.new_mutex(unique_name("obs:idle-kill"));
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    REQUIRE(m.unlock(redsync::context::timeout(5s)));
    REQUIRE(rs.stats().nodes[2].connected);
    c[2].kill();
    // No call: the dropped connection alone must say so.
    CHECK(wait_until([&] { return !rs.stats().nodes[2].connected; }, 5s));
    CHECK(rs.stats().nodes[2].unreachable == 1);
    CHECK(rec->find_node(2, redsync::node_state::unreachable, 0) >= 0);
    CHECK(rs.stats().nodes[0].connected);
  }

  TEST_CASE("a node whose connections keep dropping is reported reconnected each time, then as a storm") {
    cluster c(3);
    tcp_proxy proxy(c[0].port());
    const std::string via_proxy = "127.0.0.1:" + std::to_string(proxy.port());
    auto rec = std::make_shared<recorder>();
    redsync::Redsync rs({"redis://" + via_proxy, c[1].uri(), c[2].uri()}, observed(rec));
    auto m = rs.new_mutex(unique_name("obs:storm"), {.expiry = 2s});
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    REQUIRE(m.unlock(redsync::context::timeout(5s)));
    for (std::uint64_t k = 1; k <= redsync::test::storm_reconnects; ++k) {
      CAPTURE(k);
      CHECK_FALSE(rec->logged(redsync::log_level::warning, "reconnect storm"));
      proxy.drop_connections();
      REQUIRE(wait_until(
          [&] {
            if (m.try_lock(redsync::context::timeout(2s))) (void)m.unlock(redsync::context::timeout(2s));
            return rs.stats().nodes[0].reconnects >= k;
          },
          10s));
    }
    CHECK(rec->logged(redsync::log_level::warning,
                      "reconnect storm: node " + via_proxy + " reconnected 5 times within 60 s"));
    const auto s = rs.stats();
    CHECK(s.nodes[0].reconnects == 5);
    // Each drop left the node with no connection up: unreachable until the
    // next connect, which was a reconnect.
    CHECK(s.nodes[0].unreachable == 5);
    CHECK(s.nodes[1].reconnects == 0);
    std::size_t reconnected = 0;
    for (long k = 0;
         (k = rec->find_node(0, redsync::node_state::reconnected, static_cast<std::size_t>(k))) >= 0; ++k)
      ++reconnected;
    CHECK(reconnected == 5);
  }

  TEST_CASE("a node restarted empty is excluded by the restart guard, then votes again") {
    cluster c(5);
    prime_records(c.uris());
    auto rec = std::make_shared<recorder>();
    redsync::redsync_options o;
    o.restart_guard = true;
    o.restart_guard_window = 500ms;
    redsync::Redsync rs(c.uris(), observed(rec, o));
    auto m = rs.new_mutex(unique_name("obs:guard"), {.expiry = 300ms, .tries = 1000});
    // The records were primed: the first lock counts every node (brand-new
    // records vote at once), and the tries cover a loaded machine.
    REQUIRE(m.lock(redsync::context::timeout(10s)));
    REQUIRE(m.unlock(redsync::context::timeout(5s)));
    const std::size_t before = rec->node_changes();

    c[2].restart();  // no persistence: its record and keys are gone
    CHECK(wait_until(
        [&] {
          if (m.lock(redsync::context::timeout(5s))) (void)m.unlock(redsync::context::timeout(5s));
          return rec->find_node(2, redsync::node_state::voting, before) >= 0;
        },
        20s));
    const long excluded = rec->find_node(2, redsync::node_state::excluded, before);
    const long voting = rec->find_node(2, redsync::node_state::voting, before);
    REQUIRE(excluded >= 0);
    CHECK(voting > excluded);
    {
      std::lock_guard lk(rec->mu);
      CHECK(rec->nodes[static_cast<std::size_t>(excluded)].detail.find("record") != std::string::npos);
    }
    CHECK(rec->logged(redsync::log_level::warning, c[2].address() + " excluded from the quorum"));
    CHECK(rec->logged(redsync::log_level::info, c[2].address() + " votes again"));
    const auto s = rs.stats();
    CHECK_FALSE(s.nodes[2].excluded);
    CHECK(s.nodes[2].answers_with(redsync::node_status::excluded) >= 1);
  }

  TEST_CASE("SCRIPT FLUSH on the nodes is logged as a NOSCRIPT reload warning and counted") {
    cluster c(3);
    auto rec = std::make_shared<recorder>();
    redsync::Redsync rs(c.uris(), observed(rec));
    auto m = rs.new_mutex(unique_name("obs:flush"), {.expiry = 2s});
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    REQUIRE(m.unlock(redsync::context::timeout(5s)));
    CHECK_FALSE(rec->logged(redsync::log_level::warning, "NOSCRIPT"));
    auto s = rs.stats();
    for (const auto& n : s.nodes) {
      CHECK(n.script_loads >= 1);  // first use
      CHECK(n.script_reloads == 0);
    }

    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).command({"SCRIPT", "FLUSH"});
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    REQUIRE(m.unlock(redsync::context::timeout(5s)));
    CHECK(rec->logged(redsync::log_level::warning, "NOSCRIPT"));
    s = rs.stats();
    for (const auto& n : s.nodes) CHECK(n.script_reloads >= 1);
  }

  TEST_CASE("FUNCTION FLUSH is logged as a function reload warning with script_mode functions") {
    cluster c(3);
    auto rec = std::make_shared<recorder>();
    redsync::redsync_options o = fresh_nodes();
    o.script_mode = redsync::script_mode::functions;
    redsync::Redsync rs(c.uris(), observed(rec, o));
    auto m = rs.new_mutex(unique_name("obs:fflush"), {.expiry = 2s});
    const auto first = m.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(first, first.describe());
    REQUIRE(m.unlock(redsync::context::timeout(5s)));
    CHECK_FALSE(rec->logged(redsync::log_level::warning, "function library"));

    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).command({"FUNCTION", "FLUSH"});
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    REQUIRE(m.unlock(redsync::context::timeout(5s)));
    CHECK(rec->logged(redsync::log_level::warning, "lost function library"));
    for (const auto& n : rs.stats().nodes) CHECK(n.script_reloads >= 1);
  }

  TEST_CASE("a lock whose keys are deleted on a majority under auto-extension is reported lost once") {
    cluster c(5);
    auto rec = std::make_shared<recorder>();
    redsync::Redsync rs(c.uris(), observed(rec));
    const auto name = unique_name("obs:lost");
    std::atomic<int> on_lost_calls{0};
    auto m = rs.new_mutex(
        name,
        {.expiry = 900ms, .auto_extend = true, .on_lost = [&](const redsync::result&) { ++on_lost_calls; }});
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    for (std::size_t i = 0; i < 3; ++i) redis_client(c[i]).command({"DEL", name});

    CHECK(wait_until([&] { return !rec->calls_of("lost").empty(); }, 5s));
    const auto lost = rec->calls_of("lost");
    REQUIRE(lost.size() == 1);
    CHECK(lost[0].names == std::vector<std::string>{name});
    CHECK(lost[0].error == redsync::errc::lost);
    // The observer hears of the loss before on_lost runs (on the loop
    // thread, right after): wait for it rather than race it.
    CHECK(wait_until([&] { return on_lost_calls.load() == 1; }, 2s));
    CHECK(on_lost_calls.load() == 1);
    CHECK(m.lost());
    // The failed automatic extension that decided it was observed too.
    bool failed_auto = false;
    for (const auto& e : rec->calls_of("extend")) failed_auto |= e.flag && e.error;
    CHECK(failed_auto);
    const auto s = rs.stats();
    CHECK(s.lost_locks == 1);
    CHECK(s.extensions.total_failures() >= 1);
    CHECK(rec->logged(redsync::log_level::warning, "was lost while held"));
  }

  TEST_CASE("an observer that throws does not break locking; its exceptions are counted and logged") {
    struct thrower : redsync::observer {
      void on_acquire(const redsync::acquire_event&) override { throw std::runtime_error("boom on acquire"); }
      void on_release(const redsync::release_event&) override { throw 42; }
    };
    cluster c(3);
    std::mutex mu;
    std::vector<std::string> errors;
    redsync::redsync_options o = fresh_nodes();
    o.observer = std::make_shared<thrower>();
    o.log = [&](redsync::log_level l, std::string_view text) {
      std::lock_guard lk(mu);
      if (l == redsync::log_level::error) errors.emplace_back(text);
    };
    redsync::Redsync rs(c.uris(), o);
    auto m = rs.new_mutex(unique_name("obs:throw"), {.expiry = 2s});
    for (int i = 0; i < 3; ++i) {
      const auto r = m.lock(redsync::context::timeout(5s));
      REQUIRE_MESSAGE(r, r.describe());
      CHECK(m.held());
      CHECK(m.unlock(redsync::context::timeout(5s)));
    }
    const auto s = rs.stats();
    CHECK(s.acquisitions.ok == 3);
    CHECK(s.releases.ok == 3);
    // 3 acquisitions and 3 releases threw.
    CHECK(s.observer_errors == 6);
    std::lock_guard lk(mu);
    CHECK(errors.size() == 6);
    CHECK(std::count_if(errors.begin(), errors.end(), [](const std::string& e) {
            return e.find("boom on acquire") != std::string::npos;
          }) == 3);
  }

  TEST_CASE("a callback that calls stats() and starts another lock does not deadlock") {
    struct reentrant : redsync::observer {
      redsync::Redsync* rs = nullptr;
      std::optional<redsync::Mutex> second;
      std::promise<redsync::result> second_done;
      std::atomic<std::uint64_t> seen_ok{0};
      std::error_code blocking_error;
      bool started = false;
      void on_acquire(const redsync::acquire_event& e) override {
        // The counters already include this acquisition.
        seen_ok = rs->stats().acquisitions.ok;
        if (started) return;
        started = true;
        second.emplace(rs->new_mutex(e.names[0] + ":second", {.expiry = 2s}));
        // A blocking call here would be refused (would_deadlock); the async one runs.
        blocking_error = second->lock(redsync::context::timeout(1s)).error;
        second->lock_async(redsync::context::timeout(5s),
                           [this](redsync::result r) { second_done.set_value(std::move(r)); });
      }
    };
    cluster c(3);
    auto obs = std::make_shared<reentrant>();
    redsync::redsync_options o = fresh_nodes();
    o.observer = obs;
    redsync::Redsync rs(c.uris(), o);
    obs->rs = &rs;
    auto m = rs.new_mutex(unique_name("obs:reenter"), {.expiry = 2s});
    REQUIRE(m.lock(redsync::context::timeout(5s)));
    auto f = obs->second_done.get_future();
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    CHECK(f.get());
    CHECK(obs->seen_ok.load() == 2);
    CHECK(obs->blocking_error == redsync::errc::would_deadlock);
    CHECK(rs.stats().acquisitions.ok == 2);
    CHECK(m.unlock(redsync::context::timeout(5s)));
    CHECK(obs->second->unlock(redsync::context::timeout(5s)));
    obs->second.reset();  // a Mutex must not outlive its Redsync
  }

  TEST_CASE("without an observer or log hook, stats() still counts, from any thread") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("obs:plain"), {.expiry = 2s});
    std::atomic<bool> stop{false};
    std::thread reader([&] {
      while (!stop) (void)rs.stats();
    });
    for (int i = 0; i < 5; ++i) {
      REQUIRE(m.lock(redsync::context::timeout(5s)));
      REQUIRE(m.unlock(redsync::context::timeout(5s)));
    }
    stop = true;
    reader.join();
    const auto s = rs.stats();
    CHECK(s.acquisitions.ok == 5);
    CHECK(s.releases.ok == 5);
    CHECK(answers(s, redsync::node_status::ok) == 30);
  }
}
