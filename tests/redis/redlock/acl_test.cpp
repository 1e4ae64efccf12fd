// The least-privilege ACL of docs/acl.md, proved in each script_mode: the
// main Redlock scenarios run as a user with exactly the documented rights
// (tests/support/lock_acl.hpp, which the document must contain word for
// word), on real servers whose ACL is in their startup config so a restart
// keeps it.

#include "acl_checks.hpp"
#include "fresh_nodes.hpp"
#include "lock_acl.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <future>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using redsync::script_mode;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// Three servers whose only user besides `default` is `locker` with exactly
// the documented rights of `mode`.
struct documented_acl_cluster {
  cluster servers;
  std::vector<std::string> uris;

  static redsync::test::config with_user(script_mode mode) {
    redsync::test::config cfg;
    cfg.extra_args = lock_user_args(lock_acl_rule_list(mode));
    return cfg;
  }

  explicit documented_acl_cluster(script_mode mode) : servers(3, with_user(mode)) {
    for (std::size_t i = 0; i < servers.size(); ++i)
      uris.push_back("redis://" + lock_user_info() + servers[i].address());
  }

  long long acl_denials() {
    long long n = 0;
    for (std::size_t i = 0; i < servers.size(); ++i)
      n += static_cast<long long>(redis_client(servers[i]).command({"ACL", "LOG"}).elements.size());
    return n;
  }

  long long waiting_on_node0(const std::string& name) {
    return redis_client(servers[0]).command({"ZCARD", name + ":redsync-line"}).integer;
  }
};

void run_main_scenarios(script_mode mode) {
  documented_acl_cluster c(mode);
  if (mode == script_mode::functions) {
    // The functions-mode user cannot run scripts any other way.
    for (const char* verb : {"EVAL", "EVALSHA"}) {
      const auto r = redis_client(c.servers[0]).command({"ACL", "DRYRUN", lock_user, verb, "return 1", "0"});
      CHECK_MESSAGE(r.str.find("no permissions") != std::string::npos, verb, ": ", r.str);
    }
  }
  redsync::Redsync rs(c.uris, fresh_nodes({.script_mode = mode}));

  // Lock, extend, check, unlock, fencing.
  const auto name = unique_name("app:documented-acl");
  auto m = rs.new_mutex(name, {.expiry = 2s});
  check_no_server_error(m.lock(redsync::context::timeout(5s)), "lock");
  const auto first = m.token();
  CHECK(first.value > 0);
  check_no_server_error(m.extend(), "extend");
  check_no_server_error(m.valid(), "valid");

  // Contention: two waiters line up in order and each is handed the lock
  // on release (a 5 s retry delay: only the release's wake-up is fast).
  const redsync::mutex_options patient{
      .expiry = 2s, .tries = 1000, .retry_delay = [](int) { return 5000ms; }};
  auto w1 = rs.new_mutex(name, patient);
  auto w2 = rs.new_mutex(name, patient);
  auto f1 = w1.lock_future();
  REQUIRE(wait_until([&] { return c.waiting_on_node0(name) == 1; }, 3s));
  auto f2 = w2.lock_future();
  REQUIRE(wait_until([&] { return c.waiting_on_node0(name) == 2; }, 3s));
  check_no_server_error(m.unlock(redsync::context{}), "unlock");
  REQUIRE(f1.wait_for(3s) == std::future_status::ready);
  check_no_server_error(f1.get(), "first waiter");
  CHECK(f2.wait_for(100ms) == std::future_status::timeout);  // the second stays in line
  CHECK(w1.token() > first);
  check_no_server_error(w1.unlock(redsync::context{}), "first waiter's unlock");
  REQUIRE(f2.wait_for(3s) == std::future_status::ready);
  check_no_server_error(f2.get(), "second waiter");
  CHECK(w2.token() > w1.token());
  check_no_server_error(w2.unlock(redsync::context{}), "second waiter's unlock");
  CHECK(c.acl_denials() == 0);

  // A semaphore: acquire, extend, release, a waiter woken by the release
  // (a 5 s retry delay: only the wake-up is fast).
  const auto sem_name = unique_name("app:documented-acl-sem");
  auto sem =
      rs.new_semaphore(sem_name, 1, {.expiry = 2s, .tries = 1000, .retry_delay = [](int) { return 5000ms; }});
  auto p = sem.acquire(redsync::context::timeout(5s));
  check_no_server_error(p.outcome, "semaphore acquire");
  check_no_server_error(p.permit.extend(), "permit extend");
  auto waiter = sem.acquire_future(redsync::context::timeout(10s));
  // The waiter was refused once it listens for releases.
  REQUIRE(wait_until(
      [&] {
        // Its own channel: the semaphore's, ':', the SHA1 of its value.
        const auto r = redis_client(c.servers[0])
                           .command({"PUBSUB", "CHANNELS", "redsync:sem-release:" + sem_name + ":*"});
        return r.elements.size() == 1;
      },
      3s));
  const auto released_at = clock_type::now();
  check_no_server_error(p.permit.release(), "permit release");
  REQUIRE(waiter.wait_for(3s) == std::future_status::ready);
  CHECK(clock_type::now() - released_at < 3s);
  auto woken = waiter.get();
  check_no_server_error(woken.outcome, "semaphore waiter");
  check_no_server_error(woken.permit.release(), "waiter's release");
  CHECK(c.acl_denials() == 0);

  // An RWMutex: two readers, a writer woken in line when both let go, its
  // extension and check; then a reader woken by the writer's release.
  const auto rw_name = unique_name("app:documented-acl-rw");
  auto ra = rs.new_rw_mutex(rw_name, {.expiry = 2s});
  auto rb = rs.new_rw_mutex(rw_name, patient);
  check_no_server_error(ra.reader().lock(redsync::context::timeout(5s)), "reader lock");
  check_no_server_error(rb.reader().lock(redsync::context::timeout(5s)), "second reader lock");
  check_no_server_error(ra.reader().extend(), "reader extend");
  check_no_server_error(ra.reader().valid(), "reader valid");
  auto rw_writer = rs.new_rw_mutex(rw_name, patient);
  auto wf = rw_writer.writer().lock_future();
  REQUIRE(wait_until([&] { return c.waiting_on_node0(rw_name) == 1; }, 3s));
  check_no_server_error(ra.reader().unlock(redsync::context{}), "reader unlock");
  check_no_server_error(rb.reader().unlock(redsync::context{}), "second reader unlock");
  REQUIRE(wf.wait_for(3s) == std::future_status::ready);
  check_no_server_error(wf.get(), "writer after the readers");
  auto rf = rb.reader().lock_future();
  REQUIRE(wait_until([&] { return c.waiting_on_node0(rw_name) == 1; }, 3s));
  check_no_server_error(rw_writer.writer().unlock(redsync::context{}), "writer unlock");
  REQUIRE(rf.wait_for(3s) == std::future_status::ready);
  check_no_server_error(rf.get(), "reader after the writer");
  check_no_server_error(rb.reader().unlock(redsync::context{}), "last reader unlock");
  CHECK(c.acl_denials() == 0);

  // Restart-guard repair: node 0 restarts empty (no record, and no
  // functions); its record is read, repaired and stamped as this user
  // until its vote counts again, and tokens keep rising.
  c.servers[0].restart();
  auto again = rs.new_mutex(name, {.expiry = 300ms, .tries = 1});
  bool node0_votes = false;
  const auto deadline = clock_type::now() + 10s;
  while (!node0_votes && clock_type::now() < deadline) {
    auto r = again.lock(redsync::context::timeout(2s));
    if (r.ok()) {
      node0_votes = r.nodes[0].status == redsync::node_status::ok;
      CHECK(again.token() > w2.token());
      CHECK(again.unlock(redsync::context{}).ok());
    }
    for (const auto& n : r.nodes) CHECK_MESSAGE(n.error_class == redsync::server_error::none, n.message);
    if (!node0_votes) std::this_thread::sleep_for(50ms);
  }
  CHECK(node0_votes);
  CHECK_FALSE(redis_client(c.servers[0]).command({"HGET", "redsync:node", "run"}).str.empty());
  CHECK(c.acl_denials() == 0);
}

}  // namespace

TEST_SUITE("acl") {
  TEST_CASE("docs/acl.md shows the lock user's rules of each script mode word for word") {
    const std::string doc = read_acl_doc();
    for (const auto mode : {script_mode::eval, script_mode::functions}) {
      const std::string line =
          "ACL SETUSER locker reset on >CHANGE-ME " + redsync::test::lock_acl_rules(mode);
      CHECK_MESSAGE(doc.find(line + "\n") != std::string::npos, "docs/acl.md lacks the line: ", line);
    }
  }

  TEST_CASE("a user with exactly the documented rights runs the main scenarios with EVAL scripts") {
    run_main_scenarios(script_mode::eval);
  }

  TEST_CASE("a user with exactly the documented rights runs the main scenarios with Redis Functions") {
    run_main_scenarios(script_mode::functions);
  }
}
