// Observing a semaphore's permits: their acquisitions, releases, extensions
// and losses are observer events and stats() counters of their own, apart
// from the mutex's, against real servers robbed of their keys.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

// Copies of the permit events (and of any mutex event, which must not come).
struct permit_recorder : redsync::observer {
  struct call {
    std::string kind;  // acquire, release, extend, lost
    std::string semaphore;
    int permits = 0;
    std::string id;
    std::uint32_t slot = 0;
    std::uint64_t token = 0;
    std::error_code error;
    bool flag = false;  // blocking (acquire) or automatic (extend)
    std::thread::id thread;
  };
  mutable std::mutex mu;
  std::vector<call> calls;
  int mutex_events = 0;
  std::vector<std::string> warnings;

  void add(std::string kind, const redsync::permit_info& p, const redsync::result& r, bool flag) {
    std::lock_guard lk(mu);
    calls.push_back({std::move(kind), std::string(p.semaphore), p.permits, std::string(p.id), p.slot,
                     p.token.value, r.error, flag, std::this_thread::get_id()});
  }
  void on_permit_acquire(const redsync::permit_acquire_event& e) override {
    add("acquire", e.permit, e.outcome, e.blocking);
  }
  void on_permit_release(const redsync::permit_release_event& e) override {
    add("release", e.permit, e.outcome, false);
  }
  void on_permit_extend(const redsync::permit_extend_event& e) override {
    add("extend", e.permit, e.outcome, e.automatic);
  }
  void on_permit_lost(const redsync::permit_lost_event& e) override {
    add("lost", e.permit, e.outcome, false);
  }
  void on_acquire(const redsync::acquire_event&) override { count_mutex_event(); }
  void on_release(const redsync::release_event&) override { count_mutex_event(); }
  void on_extend(const redsync::extend_event&) override { count_mutex_event(); }
  void on_lost(const redsync::lost_event&) override { count_mutex_event(); }
  void count_mutex_event() {
    std::lock_guard lk(mu);
    ++mutex_events;
  }
  redsync::log_hook hook() {
    return [this](redsync::log_level l, std::string_view m) {
      std::lock_guard lk(mu);
      if (l == redsync::log_level::warning) warnings.emplace_back(m);
    };
  }
  std::vector<call> calls_of(const std::string& kind) const {
    std::lock_guard lk(mu);
    std::vector<call> out;
    for (const auto& c : calls)
      if (c.kind == kind) out.push_back(c);
    return out;
  }
};

// Three nodes and a Redsync on them that tells `rec` its events and logs.
struct observed_set {
  observed_set() : rs(c.uris(), options()) {}

  cluster c{3};
  std::shared_ptr<permit_recorder> rec = std::make_shared<permit_recorder>();
  redsync::Redsync rs;

 private:
  redsync::redsync_options options() {
    auto o = fresh_nodes();
    o.observer = rec;
    o.log = rec->hook();
    return o;
  }
};

}  // namespace

TEST_SUITE("semaphore observer") {
  TEST_CASE(
      "a permit's acquisition, extensions and release are permit events, counted apart from a mutex's") {
    observed_set o;
    auto& rec = o.rec;
    auto& rs = o.rs;
    const auto name = unique_name("sem-observed");
    auto sem = rs.new_semaphore(name, 2, {.expiry = 2s, .auto_extend = true, .auto_extend_interval = 50ms});
    auto a = sem.acquire({});
    REQUIRE(a.ok());
    REQUIRE(a.permit.extend({}).ok());
    REQUIRE(wait_until(
        [&] {
          for (const auto& e : rec->calls_of("extend"))
            if (e.flag) return true;
          return false;
        },
        3s));
    REQUIRE(a.permit.release({}).ok());

    const auto acquires = rec->calls_of("acquire");
    REQUIRE(acquires.size() == 1);
    CHECK(acquires[0].semaphore == name);
    CHECK(acquires[0].permits == 2);
    CHECK(acquires[0].id == a.permit.id());
    CHECK(acquires[0].slot == a.permit.slot());
    CHECK(acquires[0].token == a.permit.token().value);
    CHECK(acquires[0].flag);  // blocking
    CHECK_FALSE(acquires[0].error);
    const auto extends = rec->calls_of("extend");
    REQUIRE(extends.size() >= 2);
    CHECK(std::count_if(extends.begin(), extends.end(), [](const auto& e) { return !e.flag; }) == 1);
    for (const auto& e : extends) {
      CHECK(e.id == a.permit.id());
      CHECK_FALSE(e.error);
    }
    const auto releases = rec->calls_of("release");
    REQUIRE(releases.size() == 1);
    CHECK(releases[0].id == a.permit.id());
    CHECK_FALSE(releases[0].error);

    const auto s = rs.stats();
    CHECK(s.permit_acquisitions.ok == 1);
    CHECK(s.permit_releases.ok == 1);
    CHECK(s.permit_extensions.ok == extends.size());
    CHECK(s.acquisitions.ok == 0);
    CHECK(s.releases.ok == 0);
    CHECK(s.extensions.ok == 0);
    std::lock_guard lk(rec->mu);
    CHECK(rec->mutex_events == 0);
  }

  TEST_CASE("a refused permit acquisition is an event naming only its semaphore, counted by its error") {
    observed_set o;
    auto& rec = o.rec;
    auto& rs = o.rs;
    const auto name = unique_name("sem-refused");
    auto sem = rs.new_semaphore(name, 1, {.expiry = 5s});
    auto first = sem.try_acquire({});
    REQUIRE(first.ok());
    auto second = sem.try_acquire({});
    REQUIRE(second.outcome.error == redsync::errc::busy);
    const auto acquires = rec->calls_of("acquire");
    REQUIRE(acquires.size() == 2);
    CHECK(acquires[1].error == redsync::errc::busy);
    CHECK(acquires[1].semaphore == name);
    CHECK(acquires[1].permits == 1);
    CHECK(acquires[1].id.empty());
    CHECK(acquires[1].token == 0);
    CHECK_FALSE(acquires[1].flag);  // try_acquire
    CHECK(rs.stats().permit_acquisitions.failures(redsync::errc::busy) == 1);
    CHECK(rs.stats().acquisitions.total_failures() == 0);
  }

  TEST_CASE("a lost permit is an event before on_lost, a warning in the log, and counted apart from locks") {
    observed_set o;
    auto& c = o.c;
    auto& rec = o.rec;
    auto& rs = o.rs;
    const auto name = unique_name("sem-lost-event");
    std::atomic<std::size_t> events_at_on_lost{99};
    auto sem = rs.new_semaphore(
        name, 1,
        {.expiry = 2s,
         .auto_extend = true,
         .auto_extend_interval = 100ms,
         .on_lost = [&](const redsync::result&) { events_at_on_lost = rec->calls_of("lost").size(); }});
    auto a = sem.try_acquire({});
    REQUIRE(a.ok());
    for (std::size_t i : {0, 1})
      redis_client(c[i]).command({"DEL", "redsync:sem:{" + name + "}", "redsync:sem:{" + name + "}:permits"});
    REQUIRE(wait_until([&] { return events_at_on_lost.load() != 99; }, 3s));
    CHECK(events_at_on_lost.load() == 1);  // the event came first
    const auto lost = rec->calls_of("lost");
    REQUIRE(lost.size() == 1);
    CHECK(lost[0].error == redsync::errc::lost);
    CHECK(lost[0].id == a.permit.id());
    CHECK(lost[0].slot == a.permit.slot());
    const auto s = rs.stats();
    CHECK(s.lost_permits == 1);
    CHECK(s.lost_locks == 0);
    CHECK(s.permit_extensions.failures(redsync::errc::expired) >= 1);
    {
      std::lock_guard lk(rec->mu);
      REQUIRE(rec->warnings.size() == 1);
      CHECK(rec->warnings[0].find("permit " + a.permit.id() + " (slot 0) of semaphore \"" + name + "\"") !=
            std::string::npos);
    }
    const std::string text = redsync::prometheus_text(rs.stats());
    CHECK(text.find("redsync_lost_permits_total 1\n") != std::string::npos);
    CHECK(text.find("redsync_permit_acquisitions_total{result=\"ok\"} 1\n") != std::string::npos);
  }
}  // TEST_SUITE
