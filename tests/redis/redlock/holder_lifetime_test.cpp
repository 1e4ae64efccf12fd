// A holder's lifetime (a permit's or a Mutex's), from an adversarial review
// of permit auto-extension, the lost signal, and the shutdown and listener
// fixes: races between a permit's release and
// its extensions (by hand and automatic) with a frozen node, a permit
// destroyed while extending, the lost signal's once-ness, a Mutex let go of
// in its own callbacks while its Redsync shuts down, and how often waiters
// of one Redsync look again.

#include "drop_at_shutdown.hpp"
#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

std::string member_of(const redsync::permit& p) {
  return std::to_string(p.slot()) + ":" + p.id();
}

// Whether node `c` still lists the permit's member (live or not).
bool has_member(redis_client& c, const std::string& name, const std::string& member) {
  return !c.command({"ZSCORE", semaphore_key(name), member}).str.empty();
}

// Runs `body` in a forked child and returns its wait status (the child
// ends with _exit(body())). A use after free that crashes takes down only
// the child, and the test reports it instead of dying. Killed after 30 s.
template <class F>
int in_child(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  const auto end = clock_type::now() + 30s;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (clock_type::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  return status;
}

// Takes back freed small blocks of this thread's heap and scribbles on
// them, so that a later read through a dangling pointer sees garbage (and
// crashes) rather than the stale but intact object.
void scribble_freed_memory() {
  for (int round = 0; round < 4; ++round) {
    for (std::size_t n = 8; n <= 2048; n += 8) {
      void* b = std::malloc(n);
      if (b != nullptr) std::memset(b, 0xAB, n);  // leaked on purpose
    }
  }
}

}  // namespace

TEST_SUITE("holder lifetime") {
  TEST_CASE("a permit extended by hand as it is released is gone from a frozen node once it resumes") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("r2-extend-release");
    auto sem = rs.new_semaphore(name, 1, {.expiry = 4s});
    auto a = sem.try_acquire({});
    REQUIRE(a.ok());
    const std::string member = member_of(a.permit);
    c[2].pause();
    // Both go out at once, the extension first, on each node's connection.
    auto ext = a.permit.extend_future({});
    auto rel = a.permit.release_future({});
    CHECK(rel.get().ok());
    (void)ext.get();
    CHECK_FALSE(a.permit.held());
    std::this_thread::sleep_for(300ms);
    c[2].resume();
    // Whatever order the frozen node runs the two in, the permit is gone
    // there too (an extension never re-creates a permit).
    redis_client probe(c[2]);
    CHECK(wait_until([&] { return !has_member(probe, name, member); }, 2s));
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      CHECK_MESSAGE(!has_member(cl, name, member), "node ", i);
    }
    // And another holder gets the slot at once.
    auto b = sem.try_acquire({});
    CHECK(b.ok());
  }

  TEST_CASE("a permit destroyed while its automatic extension waits on a frozen node is released there") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("r2-drop-extending");
    std::atomic<int> lost{0};
    auto sem = rs.new_semaphore(name, 1,
                                {.expiry = 3s,
                                 .auto_extend = true,
                                 .auto_extend_interval = 50ms,
                                 .on_lost = [&](const redsync::result&) { ++lost; }});
    std::string member;
    {
      auto a = sem.try_acquire({});
      REQUIRE(a.ok());
      member = member_of(a.permit);
      c[1].pause();
      // Extensions keep going out; node 1's wait in its connection.
      std::this_thread::sleep_for(400ms);
      CHECK(a.permit.held());
    }  // destroyed while held and extending: released in the background
    for (std::size_t i : {0, 2}) {
      redis_client cl(c[i]);
      CHECK(wait_until([&] { return !has_member(cl, name, member); }, 2s));
      cl.reset_stats();
    }
    c[1].resume();
    redis_client probe(c[1]);
    CHECK(wait_until([&] { return !has_member(probe, name, member); }, 2s));
    // Past the expiry: nothing extends, nothing is declared lost.
    std::this_thread::sleep_for(3500ms);
    for (std::size_t i : {0, 2}) {
      redis_client cl(c[i]);
      CHECK_MESSAGE(script_calls(cl) == 0, "node ", i);
      CHECK_FALSE(has_member(cl, name, member));
    }
    CHECK_FALSE(has_member(probe, name, member));
    CHECK(lost.load() == 0);
    CHECK(rs.stats().lost_permits == 0);
  }

  TEST_CASE("an auto-extended permit outlives a frozen minority node, with no lost signal") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("r2-frozen-minority");
    std::atomic<int> lost{0};
    auto sem = rs.new_semaphore(
        name, 1, {.expiry = 1s, .auto_extend = true, .on_lost = [&](const redsync::result&) { ++lost; }});
    auto a = sem.try_acquire({});
    REQUIRE(a.ok());
    const auto first = a.permit.until();
    c[0].pause();
    std::this_thread::sleep_for(3s);
    c[0].resume();
    CHECK(a.permit.held());
    CHECK(a.permit.until() > first + 1500ms);
    CHECK(lost.load() == 0);
    CHECK(a.permit.release({}).ok());
    CHECK(lost.load() == 0);
  }

  TEST_CASE("a lost permit's lost signal fires once and never after its until()") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("r2-lost-once");
    std::atomic<int> lost{0};
    std::atomic<clock_type::rep> lost_at{0};
    auto sem = rs.new_semaphore(name, 1,
                                {.expiry = 1s,
                                 .auto_extend = true,
                                 .auto_extend_interval = 100ms,
                                 .on_lost = [&](const redsync::result&) {
                                   lost_at = clock_type::now().time_since_epoch().count();
                                   ++lost;
                                 }});
    auto a = sem.try_acquire({});
    REQUIRE(a.ok());
    // Two frozen of three: no extension can reach a quorum.
    c[0].pause();
    c[2].pause();
    REQUIRE(wait_until([&] { return lost.load() > 0; }, 3s));
    const auto fired = clock_type::time_point(clock_type::duration(lost_at.load()));
    CHECK(fired < a.permit.until());
    CHECK_FALSE(a.permit.held());
    c[0].resume();
    c[2].resume();
    // A release after the loss says lost, and fires nothing more.
    CHECK(a.permit.release({}).error == redsync::errc::lost);
    std::this_thread::sleep_for(500ms);
    CHECK(lost.load() == 1);
    CHECK(rs.stats().lost_permits == 1);
  }

  // Was a use after free (review 2): the watchdog's lost alarm held no
  // reference to what it watches (its callback captures `this`), and
  // declare_lost() went on using the holder and its own settings after
  // mark_lost() had turned held() false and stopped the lost token. A
  // std::stop_callback on lost_token() (semaphore.hpp: "attach a
  // std::stop_callback") that drops the permit, or another thread that
  // polls lost() and then drops it, freed the permit_state (and the
  // watchdog in it) while mark_lost() still called
  // telemetry().permit_lost(*this) and declare_lost() then copied
  // settings_.on_lost. The same held for a Mutex (mutex_state::mark_lost).
  // Now mark_lost() keeps the holder alive and declare_lost() touches no
  // member after it.
  TEST_CASE("a permit dropped by a stop_callback on its lost token as it is lost is not used after") {
    cluster c(3);
    const auto uris = c.uris();
    const int status = in_child([&] {
      redsync::Redsync rs(uris, fresh_nodes());
      // One extension, then the alarm declares the loss with nothing in
      // flight: only the permit handle keeps the permit's state alive.
      auto sem = rs.new_semaphore(unique_name("r2-lost-drop"), 1,
                                  {.expiry = 1s,
                                   .auto_extend = true,
                                   .auto_extend_interval = 100ms,
                                   .max_extensions = 1,
                                   .on_lost = [](const redsync::result&) {}});
      auto a = sem.try_acquire({});
      if (!a.ok()) return 2;
      std::optional<redsync::permit> p(std::move(a.permit));
      std::atomic<bool> dropped{false};
      std::stop_callback on_lost(p->lost_token(), [&] {
        p.reset();  // on the loop thread, inside the loss
        scribble_freed_memory();
        dropped = true;
      });
      if (!wait_until([&] { return dropped.load(); }, 5s)) return 3;
      std::this_thread::sleep_for(300ms);
      std::fflush(nullptr);
      ::_exit(0);  // no destructors: only the loss path is under test
      return 0;
    });
    INFO("child wait status ", status, ", signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  TEST_CASE("a Mutex dropped by a stop_callback on its lost token as it is lost is not used after") {
    cluster c(3);
    const auto uris = c.uris();
    const int status = in_child([&] {
      redsync::Redsync rs(uris, fresh_nodes());
      std::optional<redsync::Mutex> m(rs.new_mutex(
          unique_name("r2-mutex-lost-drop"),
          {.expiry = 1s, .auto_extend = true, .auto_extend_interval = 100ms, .max_extensions = 1}));
      if (!m->try_lock({}).ok()) return 2;
      std::atomic<bool> dropped{false};
      std::stop_callback on_lost(m->lost_token(), [&] {
        m.reset();
        scribble_freed_memory();
        dropped = true;
      });
      if (!wait_until([&] { return dropped.load(); }, 5s)) return 3;
      std::this_thread::sleep_for(300ms);
      std::fflush(nullptr);
      ::_exit(0);
      return 0;
    });
    INFO("child wait status ", status, ", signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  TEST_CASE("a Mutex destroyed in its own extend callback while its Redsync shuts down is released") {
    cluster c(3);
    const auto name = unique_name("r2-drop-in-extend");
    drop_at_shutdown drop;
    std::unique_ptr<redsync::Mutex> m;
    {
      redsync::Redsync rs(c.uris(), fresh_nodes());
      m = std::make_unique<redsync::Mutex>(rs.new_mutex(name, {.expiry = 60s, .tries = 1}));
      REQUIRE(m->try_lock({}).ok());
      m->extend_async({}, [&](redsync::result r) {
        drop.report_then_wait(r.ok());
        m.reset();  // inside the extension's report, its turn not yet over
      });
      REQUIRE(drop.reported());
      drop.destroying();
    }
    for (std::size_t i = 0; i < c.size(); ++i) CHECK_MESSAGE(!redis_client(c[i]).exists(name), "node ", i);
  }

  TEST_CASE("a permit destroyed in its own extend callback while its Redsync shuts down is released") {
    cluster c(3);
    const auto name = unique_name("r2-permit-drop-in-extend");
    drop_at_shutdown drop;
    std::string member;
    std::optional<redsync::permit> p;
    {
      redsync::Redsync rs(c.uris(), fresh_nodes());
      auto sem = rs.new_semaphore(name, 2, {.expiry = 60s, .auto_extend = true});
      auto a = sem.try_acquire({});
      REQUIRE(a.ok());
      member = member_of(a.permit);
      p.emplace(std::move(a.permit));
      p->extend_async({}, [&](redsync::result r) {
        drop.report_then_wait(r.ok());
        p.reset();
      });
      REQUIRE(drop.reported());
      drop.destroying();
    }
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client cl(c[i]);
      CHECK_MESSAGE(!has_member(cl, name, member), "node ", i);
    }
  }

  TEST_CASE("waiters of one Redsync on a held semaphore look again once each, not in a storm") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("r2-storm");
    auto sem = rs.new_semaphore(name, 1, {.expiry = 10s, .tries = 1000000});
    auto held = sem.try_acquire({});
    REQUIRE(held.ok());
    redis_client probe(c[0]);
    probe.reset_stats();
    constexpr int waiters = 12;
    std::vector<std::future<redsync::acquire_result>> fs;
    for (int i = 0; i < waiters; ++i) fs.push_back(sem.acquire_future(redsync::context::timeout(1500ms)));
    for (auto& f : fs) CHECK(f.get().outcome.error == redsync::errc::deadline_exceeded);
    // Each waiter tries about every 50..250 ms for 1.5 s (about ten tries),
    // plus one look on joining, plus its undo: well under a hundred calls
    // each.
    const long long calls = script_calls(probe);
    INFO("script calls on node 0: ", calls);
    CHECK(calls < waiters * 60);
    CHECK(held.permit.release({}).ok());
  }

  TEST_CASE("a waiter joining a busy channel is handed the permit released during its first attempt") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("r2-join-late");
    // Long retry delays: only a wake-up explains a quick grant.
    auto sem =
        rs.new_semaphore(name, 1, {.expiry = 10s, .tries = 1000, .retry_delay = [](int) { return 5s; }});
    auto held = sem.try_acquire({});
    REQUIRE(held.ok());
    // A first waiter subscribes and waits.
    auto first = sem.acquire_future(redsync::context::timeout(20s));
    std::this_thread::sleep_for(500ms);
    // Release, and have the first waiter take it; then hold it again.
    CHECK(held.permit.release({}).ok());
    auto got1 = first.get();
    REQUIRE(got1.ok());
    auto second = sem.acquire_future(redsync::context::timeout(20s));
    auto third = sem.acquire_future(redsync::context::timeout(20s));
    std::this_thread::sleep_for(300ms);
    const auto released_at = clock_type::now();
    CHECK(got1.permit.release({}).ok());
    // One of the two gets it by a wake-up, well before a 5 s retry delay.
    std::optional<redsync::acquire_result> winner;
    REQUIRE(wait_until(
        [&] {
          for (auto* f : {&second, &third}) {
            if (f->valid() && f->wait_for(0s) == std::future_status::ready) {
              winner = f->get();
              return true;
            }
          }
          return false;
        },
        4s));
    CHECK(winner->ok());
    CHECK(clock_type::now() - released_at < 3s);
    if (winner->ok()) CHECK(winner->permit.release({}).ok());
    for (auto* f : {&second, &third}) {
      if (!f->valid()) continue;
      auto r = f->get();
      if (r.ok()) CHECK(r.permit.release({}).ok());
    }
  }
}  // TEST_SUITE
