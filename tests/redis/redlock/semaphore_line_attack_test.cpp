// Adversarial review of the semaphore's fair line (rule F of
// lib/redlock/scripts/semaphore_scripts.hpp; lib/redlock/semaphore/
// permit_line.cpp) against real redis-servers: crashed, late and cancelled
// waiters, newcomers and releasers that ask again, nodes restarted under a
// line, many waiters, and the safety rules K and S under churn. A test that
// shows a bug still present fails; its comment names the bug.

#include "clock_offset.hpp"
#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"
#include "util/sha1.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

std::string set_key(const std::string& name) {
  return "redsync:sem:{" + name + "}";
}
std::string line_key(const std::string& name) {
  return set_key(name) + ":line";
}

long long line_length(cluster& c, std::size_t i, const std::string& name) {
  return redis_client(c[i]).command({"ZCARD", line_key(name)}).integer;
}
bool line_length_everywhere(cluster& c, const std::string& name, long long n) {
  for (std::size_t i = 0; i < c.size(); ++i)
    if (line_length(c, i, name) != n) return false;
  return true;
}

// A stand-in holder's permit of a k = 1 semaphore on every node, far in the
// future; lift_permit() takes it away as an expiry would (nobody is woken).
void plant_permit(cluster& c, const std::string& name) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    redis_client cl(c[i]);
    cl.command({"ZADD", set_key(name), "99999999999999", "0:someone-else"});
    cl.command({"SET", set_key(name) + ":permits", "1"});
  }
}
void lift_permit(cluster& c, const std::string& name) {
  for (std::size_t i = 0; i < c.size(); ++i)
    redis_client(c[i]).command({"ZREM", set_key(name), "0:someone-else"});
}

// This test program again, in a process of its own (exec'd: a sanitizer
// runtime does not support starting threads in a fork of a process that
// had some), running only the case "line attack child" below: a blocking
// waiter of the k = 1 semaphore `name` with retry delay `retry` (zero: the
// default), under `env` (the clock shim's, for a client whose clock is off).
pid_t spawn_child_waiter(const std::vector<std::string>& env, const std::vector<std::string>& uris,
                         const std::string& name, std::chrono::milliseconds retry) {
  std::string joined;
  for (const auto& u : uris) joined += (joined.empty() ? "" : ",") + u;
  std::vector<std::string> env_s = env;
  env_s.push_back("REDSYNC_LINE_CHILD_NAME=" + name);
  env_s.push_back("REDSYNC_LINE_CHILD_URIS=" + joined);
  env_s.push_back("REDSYNC_LINE_CHILD_RETRY_MS=" + std::to_string(retry.count()));
  if (const char* path = std::getenv("PATH")) env_s.push_back(std::string("PATH=") + path);
  // A sanitizer build's child keeps its runtime's options, and an ASan one
  // must accept the shim (LD_PRELOAD) ahead of the ASan runtime.
  std::string asan = "ASAN_OPTIONS=verify_asan_link_order=0";
  if (const char* a = std::getenv("ASAN_OPTIONS"); a != nullptr && *a != '\0') asan += std::string(":") + a;
  env_s.push_back(asan);
  for (const char* v : {"UBSAN_OPTIONS", "TSAN_OPTIONS"})
    if (const char* value = std::getenv(v)) env_s.push_back(std::string(v) + "=" + value);
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args_s{exe, "-sf=*semaphore_line_attack_test.cpp*", "-tc=line attack child*"};
  std::vector<char*> args, envp;
  for (auto& a : args_s) args.push_back(a.data());
  args.push_back(nullptr);
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execve(exe.c_str(), args.data(), envp.data());
    ::_exit(127);
  }
  return pid;
}

void kill_child(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

// How long a healthy waiter (200 ms retry delay) waits for a free permit
// while a crashed waiter with retry delay `crashed_retry` was ahead of it.
// The permit is lifted right after the healthy waiter joined the line; the
// answer is measured from the lift.
std::chrono::milliseconds wait_behind_crashed_waiter(std::chrono::milliseconds crashed_retry) {
  cluster c(3);
  prime_records(c.uris());
  const auto name = unique_name("sem-line-crash");
  plant_permit(c, name);
  const pid_t child = spawn_child_waiter({}, c.uris(), name, crashed_retry);
  // In line on every node, and settled into its retry sleep (it looks once
  // more after subscribing).
  const bool joined = wait_until([&] { return line_length_everywhere(c, name, 1); }, 10s);
  std::this_thread::sleep_for(500ms);
  kill_child(child);
  REQUIRE(joined);
  redsync::Redsync rs(c.uris(), fresh_nodes());
  auto w = rs.new_semaphore(
      name, 1, {.expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 200ms; }});
  auto f = w.acquire_future(redsync::context::timeout(18s));
  REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 2); }, 5s));
  lift_permit(c, name);
  const auto lifted = clock_type::now();
  REQUIRE(f.wait_for(19s) == std::future_status::ready);
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - lifted);
  auto r = f.get();
  REQUIRE_MESSAGE(r.ok(), r.describe());
  CHECK(r.permit.release(redsync::context::timeout(5s)).ok());
  MESSAGE("a healthy waiter waited ", waited.count(),
          " ms for a free permit behind a crashed waiter with retry delay ", crashed_retry.count(), " ms");
  return waited;
}

void ensure_clock_shim_env() {
  if (const char* shim = std::getenv("REDSYNC_CLOCK_SHIM"); shim != nullptr && *shim != '\0') return;
  const auto dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  const auto shim = dir / ".." / "support" / "libredsync_clock_shim.so";
  ::setenv("REDSYNC_CLOCK_SHIM", std::filesystem::weakly_canonical(shim).c_str(), 1);
}

}  // namespace

TEST_SUITE("semaphore line attack") {
  // Held: a waiter killed with SIGKILL (default retry delay, 50 to 250 ms)
  // holds its place at most until its lease runs out (2 x its wait until
  // the next try + the node timeout (expiry x 0.05 = 500 ms) + 1 s, about
  // 2 s), and since wake-ups drop a waiter nobody hears, only until the
  // first release or refused caller tells it (about 200 ms measured).
  TEST_CASE(
      "a crashed waiter with the default retry delay holds a free permit for no longer than its lease") {
    const auto waited = wait_behind_crashed_waiter(0ms);
    CHECK(waited < 4s);
  }

  // Was a liveness bug: a crashed waiter's lease grows with its retry
  // delay (2 x retry delay + timeout + 1 s), and while it was live every
  // other waiter was refused (rule F) and every release woke only the dead
  // waiter: a client with a 5 s retry delay that crashed kept a free permit
  // from every healthy waiter for about 11 s (measured ~10 s). Now a
  // waiter nobody hears on its channel (PUBLISH reached no subscriber) is
  // taken out of the line and the next one is woken (semaphore_wake.lua),
  // and a caller refused by the line while permits are free tells the
  // waiters ahead, with the same rule.
  TEST_CASE(
      "a crashed waiter with a 5 s retry delay does not keep a free permit from healthy waiters for its "
      "lease") {
    const auto waited = wait_behind_crashed_waiter(5000ms);
    CHECK(waited < 4s);
  }

  // Held (fairness): with a waiter W in line, a newcomer's try_acquire made
  // right after the holder's release is refused (it is behind every live
  // waiter), and the releaser's own blocking acquire made at once queues
  // behind W: W gets the permit first, the releaser after W lets go.
  TEST_CASE("neither a newcomer's try_acquire nor the releaser's new acquire overtakes a waiter") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-overtake");
    redsync::Redsync rh(c.uris(), fresh_nodes());
    redsync::Redsync rw(c.uris(), fresh_nodes());
    redsync::Redsync rn(c.uris(), fresh_nodes());
    const redsync::semaphore_options so{
        .expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 100ms; }};
    auto h = rh.new_semaphore(name, 1, so);
    auto w = rw.new_semaphore(name, 1, so);
    auto n = rn.new_semaphore(name, 1, so);
    for (int round = 0; round < 5; ++round) {
      auto held = h.acquire(redsync::context::timeout(10s));
      REQUIRE_MESSAGE(held.ok(), held.describe());
      auto wf = w.acquire_future(redsync::context::timeout(15s));
      REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
      std::this_thread::sleep_for(50ms);
      REQUIRE(held.permit.release(redsync::context::timeout(5s)).ok());
      auto t = n.try_acquire(redsync::context::timeout(5s));
      CHECK_MESSAGE(!t.ok(), "round ", round, ": a newcomer's try_acquire overtook the waiter");
      if (t.ok()) (void)t.permit.release({});
      auto again = h.acquire_future(redsync::context::timeout(15s));
      REQUIRE(wf.wait_for(10s) == std::future_status::ready);
      auto wr = wf.get();
      REQUIRE_MESSAGE(wr.ok(), wr.describe());
      CHECK_MESSAGE(again.wait_for(300ms) == std::future_status::timeout, "round ", round,
                    ": the releaser's new acquire got a permit while the waiter held it");
      REQUIRE(wr.permit.release(redsync::context::timeout(5s)).ok());
      REQUIRE(again.wait_for(10s) == std::future_status::ready);
      auto ar = again.get();
      REQUIRE_MESSAGE(ar.ok(), ar.describe());
      REQUIRE(ar.permit.release(redsync::context::timeout(5s)).ok());
      REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 0); }, 5s));
    }
  }

  // Held: a waiter given up by its deadline, or cancelled, while it sleeps
  // in line leaves the line on every node at once (not after its lease,
  // which a 20 s retry delay makes 41 s long).
  TEST_CASE("a waiter cancelled or past its deadline leaves the line at once") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-cancel");
    plant_permit(c, name);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto s = rs.new_semaphore(
        name, 1, {.expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 20s; }});
    auto late = s.acquire_future(redsync::context::timeout(1500ms));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
    REQUIRE(late.wait_for(5s) == std::future_status::ready);
    CHECK(late.get().outcome.is(redsync::errc::deadline_exceeded));
    CHECK(wait_until([&] { return line_length_everywhere(c, name, 0); }, 1s));
    std::stop_source stop;
    auto cancelled = s.acquire_future(redsync::context::cancellable(stop.get_token()));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
    std::this_thread::sleep_for(200ms);
    stop.request_stop();
    REQUIRE(cancelled.wait_for(5s) == std::future_status::ready);
    CHECK(cancelled.get().outcome.is(redsync::errc::cancelled));
    CHECK(wait_until([&] { return line_length_everywhere(c, name, 0); }, 1s));
  }

  // Held: a node killed with SIGKILL and restarted empty under a line of
  // two waiters (its line lost) does not let the later waiter overtake the
  // earlier one: the two other nodes still rank them, and a grant needs one
  // of them. Each waiter relies on wake-ups (retry delay 20 s), so the
  // restarted node's missing line must not strand either.
  TEST_CASE("a node restarted empty under the line keeps the order and strands nobody") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-restart");
    redsync::Redsync rh(c.uris(), fresh_nodes());
    redsync::Redsync r1(c.uris(), fresh_nodes());
    redsync::Redsync r2(c.uris(), fresh_nodes());
    const redsync::semaphore_options so{
        .expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 20s; }};
    auto h = rh.new_semaphore(name, 1, so);
    auto w1 = r1.new_semaphore(name, 1, so);
    auto w2 = r2.new_semaphore(name, 1, so);
    auto held = h.acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(held.ok(), held.describe());
    std::mutex mu;
    std::vector<int> order;
    auto run = [&](redsync::Semaphore& s, int who) {
      auto r = s.acquire(redsync::context::timeout(18s));
      if (!r.ok()) return r.describe();
      {
        std::lock_guard<std::mutex> g(mu);
        order.push_back(who);
      }
      std::this_thread::sleep_for(100ms);
      return r.permit.release(redsync::context::timeout(5s)).ok() ? std::string()
                                                                  : std::string("release failed");
    };
    auto f1 = std::async(std::launch::async, run, std::ref(w1), 1);
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
    std::this_thread::sleep_for(20ms);
    auto f2 = std::async(std::launch::async, run, std::ref(w2), 2);
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 2); }, 5s));
    std::this_thread::sleep_for(300ms);
    c[2].kill();
    c[2].restart();
    std::this_thread::sleep_for(300ms);
    REQUIRE(held.permit.release(redsync::context::timeout(5s)).ok());
    const auto released = clock_type::now();
    CHECK(f1.get().empty());
    CHECK(f2.get().empty());
    MESSAGE("both waiters served ",
            std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - released).count(),
            " ms after the release");
    CHECK(clock_type::now() - released < 8s);
    REQUIRE(order.size() == 2);
    CHECK(order[0] == 1);
  }

  // Held (safety: rules K and S do not depend on the line): 10 waiters of
  // a k = 2 semaphore over 5 clients churn while a node is frozen
  // (SIGSTOP) and then killed and restarted empty. At no moment do more than
  // 2 callers hold, never two the same slot, and each slot's tokens grow.
  TEST_CASE("under line churn and node faults, at most k hold, one per slot, tokens grow per slot") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-safety");
    std::vector<std::unique_ptr<redsync::Redsync>> clients;
    std::vector<redsync::Semaphore> sems;
    for (int i = 0; i < 5; ++i) {
      clients.push_back(std::make_unique<redsync::Redsync>(c.uris(), fresh_nodes()));
      for (int j = 0; j < 2; ++j)
        sems.push_back(clients.back()->new_semaphore(
            name, 2, {.expiry = 3s, .tries = redsync::unlimited_tries, .timeout_factor = 0.05}));
    }
    std::mutex mu;
    int holding = 0, max_holding = 0, shared_slot = 0, tokens_back = 0, grants = 0;
    std::map<std::uint32_t, std::uint64_t> last_token;
    std::map<std::uint32_t, int> slot_holders;
    std::atomic<bool> stop{false};
    auto worker = [&](redsync::Semaphore& s) {
      while (!stop) {
        auto r = s.acquire(redsync::context::timeout(5s));
        if (!r.ok()) continue;
        {
          std::lock_guard<std::mutex> g(mu);
          ++grants;
          max_holding = std::max(max_holding, ++holding);
          if (++slot_holders[r.permit.slot()] > 1) ++shared_slot;
          auto& last = last_token[r.permit.slot()];
          if (r.permit.token().value <= last) ++tokens_back;
          last = std::max(last, r.permit.token().value);
        }
        std::this_thread::sleep_for(20ms);
        {
          std::lock_guard<std::mutex> g(mu);
          --holding;
          --slot_holders[r.permit.slot()];
        }
        (void)r.permit.release(redsync::context::timeout(3s));
      }
    };
    std::vector<std::thread> threads;
    for (auto& s : sems) threads.emplace_back(worker, std::ref(s));
    std::this_thread::sleep_for(2s);
    c[1].pause();
    std::this_thread::sleep_for(2s);
    c[1].resume();
    std::this_thread::sleep_for(1s);
    c[2].kill();
    c[2].restart();
    std::this_thread::sleep_for(3s);
    stop = true;
    for (auto& t : threads) t.join();
    MESSAGE(grants, " grants, at most ", max_holding, " holding at once");
    CHECK(grants > 20);
    CHECK(max_holding <= 2);
    CHECK(shared_slot == 0);
    CHECK(tokens_back == 0);
  }

  // Was a cost bug: how long a node spends per acquire script (a
  // try_acquire while 2 permits are free) with 2, 200, 2000 and 20000 live
  // waiters in line. waiters_ahead (semaphore_line.lua) read the whole line
  // (ZRANGE 0 -1 WITHSCORES) whenever a permit was free, and wake_entering
  // read it on every release and every leave, although only the first
  // `free` live waiters (and the caller's own rank) decide: tens of ms of a
  // blocked node at 20000. Both now read the head of the line a page at a
  // time (scan_line).
  TEST_CASE(
      "the acquire script's cost does not grow with the whole line, only with the waiters that decide") {
    cluster c(3);
    prime_records(c.uris());
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto usec_per_call = [&](long long line_length) {
      const auto name = unique_name("sem-line-cost");
      for (std::size_t i = 0; i < c.size(); ++i) {
        redis_client cl(c[i]);
        std::vector<std::string> zadd{"ZADD", line_key(name)};
        std::vector<std::string> hset{"HSET", set_key(name) + ":leases"};
        for (long long w = 0; w < line_length; ++w) {
          zadd.push_back(std::to_string(1000 + w));
          zadd.push_back("waiter-" + std::to_string(w));
          hset.push_back("waiter-" + std::to_string(w));
          hset.push_back("99999999999999");
          if (zadd.size() > 2000 || w + 1 == line_length) {
            cl.command(zadd);
            cl.command(hset);
            zadd.resize(2);
            hset.resize(2);
          }
        }
      }
      // The first two waiters listen on their channels (a waiter nobody
      // hears is taken out of the line when told: semaphore_wake.lua), so
      // they stay ahead of every try_acquire.
      std::vector<std::unique_ptr<redis_client>> listeners;
      for (std::size_t i = 0; i < c.size(); ++i) {
        listeners.push_back(std::make_unique<redis_client>(c[i]));
        for (const char* w : {"waiter-0", "waiter-1"})
          listeners.back()->command(
              {"SUBSCRIBE", "redsync:sem-release:" + name + ":" + redsync::detail::sha1_hex(w)});
      }
      auto s = rs.new_semaphore(name, 2, {.expiry = 10s, .tries = 1});
      redis_client n0(c[0]);
      n0.reset_stats();
      const int calls = line_length >= 20000 ? 20 : 200;
      for (int i = 0; i < calls; ++i) CHECK_FALSE(s.try_acquire(redsync::context::timeout(5s)).ok());
      long long usec = 0, scripts = 0;
      for (const std::string cmd : {"evalsha", "eval"}) {
        const auto v = n0.info_field("commandstats", "cmdstat_" + cmd);
        const auto p = v.find("usec=");
        if (p == std::string::npos) continue;
        usec += std::stoll(v.substr(p + 5, v.find(',', p) - p - 5));
        scripts += n0.calls(cmd);
      }
      const long long per = usec / std::max<long long>(1, scripts);
      MESSAGE(line_length, " waiters in line: ", per, " us per script on node 0");
      return per;
    };
    (void)usec_per_call(2);  // the survey of the node records, once
    const long long at_2 = usec_per_call(2);
    const long long at_200 = usec_per_call(200);
    const long long at_2000 = usec_per_call(2000);
    const long long at_20000 = usec_per_call(20000);
    CHECK(at_200 < 2000);
    // Only the first `free` (here 2) live waiters decide: a read of the
    // line's head would keep the cost flat. It is not: 2000 waiters cost
    // many times a line of 2, 20000 block the node for tens of ms per
    // attempt.
    CHECK(at_2000 < 3 * at_2 + 200);
    CHECK(at_20000 < 3 * at_2 + 200);
  }

  // Was a liveness bug with live waiters: a holder's permit that runs out
  // (its client crashed) wakes nobody. The head of the line, a live waiter
  // that relies on wake-ups with a 5 s retry delay, slept on; the waiter
  // behind it (200 ms retry delay) tried every 200 ms and was refused each
  // time (rule F: the head's lease is live), and the permit stayed free
  // for about 3.5 s. Now a caller refused by the line while permits are
  // free tells the waiters ahead (at the rate of its own tries), so the
  // head comes for the permit within one of the second waiter's tries.
  TEST_CASE(
      "a permit that runs out is taken by the head waiter at once, woken by a waiter the line refused") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-expiry");
    plant_permit(c, name);
    redsync::Redsync r1(c.uris(), fresh_nodes());
    redsync::Redsync r2(c.uris(), fresh_nodes());
    auto head = r1.new_semaphore(
        name, 1, {.expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 5s; }});
    auto next = r2.new_semaphore(
        name, 1,
        {.expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 200ms; }});
    auto hf = head.acquire_future(redsync::context::timeout(18s));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
    std::this_thread::sleep_for(300ms);
    auto nf = next.acquire_future(redsync::context::timeout(18s));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 2); }, 5s));
    std::this_thread::sleep_for(300ms);
    lift_permit(c, name);  // as its expiry: nobody is woken
    const auto lifted = clock_type::now();
    std::future<redsync::acquire_result>* first = nullptr;
    REQUIRE(wait_until(
        [&] {
          if (hf.wait_for(0s) == std::future_status::ready)
            first = &hf;
          else if (nf.wait_for(0s) == std::future_status::ready)
            first = &nf;
          return first != nullptr;
        },
        15s));
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - lifted);
    MESSAGE("the free permit was taken ", waited.count(), " ms after it ran out, by the ",
            std::string(first == &hf ? "head waiter" : "second waiter"));
    CHECK(waited < 1500ms);
    CHECK_MESSAGE(first == &hf, "the second waiter overtook the head");
    auto r = first->get();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(r.permit.release(redsync::context::timeout(5s)).ok());
    auto& other = first == &hf ? nf : hf;
    REQUIRE(other.wait_for(15s) == std::future_status::ready);
    auto o = other.get();
    REQUIRE_MESSAGE(o.ok(), o.describe());
    CHECK(o.permit.release(redsync::context::timeout(5s)).ok());
  }

  // Held (with the lease's limit): a waiter W cut off from two of three
  // nodes (new connections refused, open ones reset) leaves the line on
  // the node it still reaches at its next attempt, is ranked behind every
  // waiter there from then on, and holds its place on the two nodes it
  // cannot reach only until its lease runs out there (default retry
  // delay: about 2 s). A healthy waiter G behind it gets the permit the
  // holder releases within that lease; W never does.
  TEST_CASE("a waiter cut off from the majority leaves where it can and holds no free permit for long") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-cutoff");
    std::vector<std::unique_ptr<tcp_proxy>> proxies;
    std::vector<std::string> via;
    for (std::size_t i = 0; i < 3; ++i) {
      proxies.push_back(std::make_unique<tcp_proxy>(c[i].port()));
      via.push_back("redis://127.0.0.1:" + std::to_string(proxies.back()->port()));
    }
    const redsync::semaphore_options so{.expiry = 10s, .tries = redsync::unlimited_tries};
    redsync::Redsync rh(c.uris(), fresh_nodes());
    redsync::Redsync rg(c.uris(), fresh_nodes());
    auto rw = std::make_unique<redsync::Redsync>(via, fresh_nodes());
    auto h = rh.new_semaphore(name, 1, so);
    auto g = rg.new_semaphore(name, 1, so);
    auto w = rw->new_semaphore(name, 1, so);
    auto held = h.acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(held.ok(), held.describe());
    auto wf = w.acquire_future(redsync::context::timeout(12s));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
    std::this_thread::sleep_for(100ms);
    auto gf = g.acquire_future(redsync::context::timeout(15s));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 2); }, 5s));
    for (std::size_t i : {1u, 2u}) {
      proxies[i]->refuse(true);
      proxies[i]->drop_connections();
    }
    CHECK(wait_until([&] { return line_length(c, 0, name) == 1; }, 3s));
    REQUIRE(held.permit.release(redsync::context::timeout(5s)).ok());
    const auto released = clock_type::now();
    REQUIRE(gf.wait_for(12s) == std::future_status::ready);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - released);
    MESSAGE("G got the permit ", waited.count(), " ms after the release");
    CHECK(waited < 4s);
    auto gr = gf.get();
    REQUIRE_MESSAGE(gr.ok(), gr.describe());
    CHECK(wf.wait_for(0s) == std::future_status::timeout);
    CHECK(gr.permit.release(redsync::context::timeout(5s)).ok());
    REQUIRE(wf.wait_for(15s) == std::future_status::ready);
    CHECK_FALSE(wf.get().ok());
    rw.reset();
  }

  // Held: a waiter made with another k (2, while the live holders agreed on
  // 1) is refused with permits_mismatch at once and is in no line after,
  // while the waiter of the right k keeps its place and gets the permit.
  TEST_CASE("a waiter with another k is refused at once and leaves no place in the line") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-mismatch");
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const redsync::semaphore_options so{
        .expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 5s; }};
    auto h = rs.new_semaphore(name, 1, so);
    auto w = rs.new_semaphore(name, 1, so);
    auto m = rs.new_semaphore(name, 2, so);
    auto held = h.acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(held.ok(), held.describe());
    auto wf = w.acquire_future(redsync::context::timeout(15s));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
    auto mr = m.acquire(redsync::context::timeout(10s));
    CHECK_MESSAGE(mr.outcome.is(redsync::errc::permits_mismatch), mr.describe());
    CHECK(wait_until([&] { return line_length_everywhere(c, name, 1); }, 2s));
    REQUIRE(held.permit.release(redsync::context::timeout(5s)).ok());
    REQUIRE(wf.wait_for(3s) == std::future_status::ready);
    auto wr = wf.get();
    REQUIRE_MESSAGE(wr.ok(), wr.describe());
    CHECK(wr.permit.release(redsync::context::timeout(5s)).ok());
    CHECK(wait_until([&] { return line_length_everywhere(c, name, 0); }, 2s));
  }

  // Held: a node frozen (SIGSTOP) while a waiter W waits, gets the permit
  // from the two others and holds it: on resume the node runs W's queued
  // attempts and then its leave, in order, so W is in no line there
  // afterwards and the node keeps no place that would hold back the next
  // caller once W lets go.
  TEST_CASE("a node frozen under a waiter keeps no stale place once it resumes") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-frozen");
    redsync::Redsync rh(c.uris(), fresh_nodes());
    redsync::Redsync rw(c.uris(), fresh_nodes());
    redsync::Redsync rn(c.uris(), fresh_nodes());
    const redsync::semaphore_options so{
        .expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 200ms; }};
    auto h = rh.new_semaphore(name, 1, so);
    auto w = rw.new_semaphore(name, 1, so);
    auto n = rn.new_semaphore(name, 1, so);
    auto held = h.acquire(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(held.ok(), held.describe());
    auto wf = w.acquire_future(redsync::context::timeout(15s));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
    c[2].pause();
    std::this_thread::sleep_for(1s);  // a few of W's attempts queue there
    (void)held.permit.release(redsync::context::timeout(3s));
    REQUIRE(wf.wait_for(5s) == std::future_status::ready);
    auto wr = wf.get();
    REQUIRE_MESSAGE(wr.ok(), wr.describe());
    std::this_thread::sleep_for(500ms);
    c[2].resume();
    CHECK(wait_until([&] { return line_length_everywhere(c, name, 0); }, 3s));
    REQUIRE(wr.permit.release(redsync::context::timeout(5s)).ok());
    auto t = n.try_acquire(redsync::context::timeout(5s));
    CHECK_MESSAGE(t.ok(), t.describe());
    if (t.ok()) (void)t.permit.release(redsync::context::timeout(5s));
  }

  // Held (fairness): 8 waiters of a k = 1 semaphore, each of its own
  // client, arriving 40 ms apart while the permit is held, are served in
  // their order of arrival (each holds 50 ms, then lets go), and every
  // release is followed by one PUBLISH per node at most (no storm).
  TEST_CASE("waiters of separate clients are served in their order of arrival") {
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-fifo");
    const redsync::semaphore_options so{
        .expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 150ms; }};
    redsync::Redsync rh(c.uris(), fresh_nodes());
    auto h = rh.new_semaphore(name, 1, so);
    auto a = h.acquire(redsync::context::timeout(10s));
    REQUIRE(a.ok());
    constexpr int n = 8;
    std::vector<std::unique_ptr<redsync::Redsync>> clients;
    std::vector<redsync::Semaphore> sems;
    for (int i = 0; i < n; ++i) {
      clients.push_back(std::make_unique<redsync::Redsync>(c.uris(), fresh_nodes()));
      sems.push_back(clients.back()->new_semaphore(name, 1, so));
    }
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::future<std::string>> runs;
    for (int i = 0; i < n; ++i) {
      runs.push_back(std::async(std::launch::async, [&, i] {
        auto r = sems[i].acquire(redsync::context::timeout(18s));
        if (!r.ok()) return r.describe();
        {
          std::lock_guard<std::mutex> g(mu);
          order.push_back(i);
        }
        std::this_thread::sleep_for(50ms);
        return r.permit.release(redsync::context::timeout(5s)).ok() ? std::string() : std::string("release");
      }));
      REQUIRE(wait_until([&] { return line_length_everywhere(c, name, i + 1); }, 5s));
      std::this_thread::sleep_for(40ms);
    }
    redis_client n0(c[0]);
    n0.reset_stats();
    REQUIRE(a.permit.release(redsync::context::timeout(5s)).ok());
    for (auto& r : runs) CHECK(r.get().empty());
    std::string got;
    for (int i : order) got += std::to_string(i);
    CHECK(got == "01234567");
    MESSAGE(n0.calls("publish"), " PUBLISH on node 0 for ", n + 1, " releases");
    CHECK(n0.calls("publish") <= 2 * (n + 1));
  }

  // The child of spawn_child_waiter: a blocking waiter that, once granted,
  // holds the permit 3 s (unless killed first). Does nothing in a normal run.
  TEST_CASE("line attack child: a waiter in a process of its own") {
    const char* name = std::getenv("REDSYNC_LINE_CHILD_NAME");
    const char* uris_text = std::getenv("REDSYNC_LINE_CHILD_URIS");
    if (name == nullptr || uris_text == nullptr) return;
    std::vector<std::string> uris;
    std::stringstream in(uris_text);
    for (std::string u; std::getline(in, u, ',');) uris.push_back(u);
    redsync::Redsync rs(uris, fresh_nodes());
    redsync::semaphore_options so{.expiry = 10s, .tries = redsync::unlimited_tries};
    const char* retry_text = std::getenv("REDSYNC_LINE_CHILD_RETRY_MS");
    const std::chrono::milliseconds retry{retry_text != nullptr ? std::atoll(retry_text) : 100};
    if (retry > 0ms) so.retry_delay = [retry](int) { return retry; };
    auto s = rs.new_semaphore(name, 1, so);
    auto r = s.acquire(redsync::context::timeout(15s));
    if (!r.ok()) return;
    std::this_thread::sleep_for(3s);
    (void)r.permit.release(redsync::context::timeout(5s));
  }

  // The documented limit (api.md "Waiting: a fair line", fair-handover.md:
  // "Arrival is the waiter's wall clock"), pinned so that the docs change if
  // it does: the line ranks waiters by their CLIENT's wall clock, as the
  // mutex line does. A client whose clock lags by 2 s that starts waiting
  // well after W is ranked ahead of W on every node and is served first; W
  // waits its hold (3 s). (A clock running ahead ranks its client behind
  // those arriving during its lead.) Not clamped by the nodes: a node that
  // moved a skewed arrival by its own clock could rank two waiters apart
  // from another node, and a split order can leave both short of a quorum
  // for as long as they wait.
  TEST_CASE("a newcomer whose wall clock lags is ranked by it and served first: the documented clock rule") {
    ensure_clock_shim_env();
    clock_offset lagging;
    lagging.set(-2000ms);
    cluster c(3);
    prime_records(c.uris());
    const auto name = unique_name("sem-line-skew");
    plant_permit(c, name);
    redsync::Redsync rw(c.uris(), fresh_nodes());
    auto w = rw.new_semaphore(
        name, 1,
        {.expiry = 10s, .tries = redsync::unlimited_tries, .retry_delay = [](int) { return 100ms; }});
    auto wf = w.acquire_future(redsync::context::timeout(18s));
    REQUIRE(wait_until([&] { return line_length_everywhere(c, name, 1); }, 5s));
    std::this_thread::sleep_for(500ms);
    const pid_t child = spawn_child_waiter(lagging.env(), c.uris(), name, 100ms);
    const bool joined = wait_until([&] { return line_length_everywhere(c, name, 2); }, 10s);
    if (joined) {
      const auto line = redis_client(c[0]).command({"ZRANGE", line_key(name), "0", "-1", "WITHSCORES"});
      MESSAGE("line on node 0 (first is served first): ", line.elements[1].str, ", then ",
              line.elements[3].str);
    }
    std::this_thread::sleep_for(200ms);
    lift_permit(c, name);
    // Not woken (the lift is an expiry): W's next try is within 100 ms.
    const auto lifted = clock_type::now();
    const bool w_first = wf.wait_for(1500ms) == std::future_status::ready;
    CHECK_MESSAGE(!w_first, "W was served first: the line no longer ranks by the client's clock (docs)");
    REQUIRE(wf.wait_for(10s) == std::future_status::ready);
    MESSAGE("W got the permit ",
            std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - lifted).count(),
            " ms after it was free");
    auto wr = wf.get();
    CHECK(wr.ok());
    if (wr.ok()) (void)wr.permit.release(redsync::context::timeout(5s));
    int status = 0;
    const bool exited = wait_until([&] { return ::waitpid(child, &status, WNOHANG) == child; }, 10s);
    if (!exited) kill_child(child);
    REQUIRE(joined);
  }
}
