// The least-privilege ACL of cluster members (docs/acl.md, "Cluster
// members"), proved: locks, a waiter woken through a sharded channel, a
// multi-name lock across slots of two masters and a durable lock, all as a
// user with exactly the documented rights (tests/support/lock_acl.hpp, which
// the document must contain word for word) on the masters of real local
// clusters; and users missing one right get a clear reason per member
// within the bound, not a hang.

#include "acl_checks.hpp"
#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "lock_acl.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_name_slot;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// Three clusters of 2 masters with a replica each, whose only user besides
// `default` (which forms the cluster and replicates) is `locker` with the
// documented cluster rights plus `extra`, minus `without`.
struct acl_clusters {
  std::vector<std::unique_ptr<redis_cluster>> members;
  std::vector<std::string> uris;

  acl_clusters(const std::vector<std::string>& extra, const std::string& without) {
    std::vector<std::string> rules = lock_acl_rule_list(redsync::script_mode::eval);
    rules.insert(rules.end(), cluster_acl_extra.begin(), cluster_acl_extra.end());
    rules.insert(rules.end(), extra.begin(), extra.end());
    std::erase(rules, without);
    redsync::test::config server;
    // No diskless sync delay (5 s by default): the replicas link at once.
    server.extra_args = {"--repl-diskless-sync-delay", "0"};
    for (auto& a : lock_user_args(rules)) server.extra_args.push_back(std::move(a));
    for (int i = 0; i < 3; ++i) {
      members.push_back(
          std::make_unique<redis_cluster>(cluster_config{.masters = 2, .replicas = 1, .server = server}));
      std::string uri = "redis+cluster://" + lock_user_info();
      for (std::size_t n = 0; n < members.back()->size(); ++n)
        uri += (n == 0 ? "" : ",") + (*members.back())[n].address();
      uris.push_back(uri);
    }
  }

  long long acl_denials() {
    long long n = 0;
    for (auto& cl : members)
      for (std::size_t i = 0; i < cl->size(); ++i)
        n += static_cast<long long>(redis_client((*cl)[i]).command({"ACL", "LOG"}).elements.size());
    return n;
  }
};

// A name starting with `base` whose slot the master `master` of a 2-master
// cluster serves.
std::string app_name_on_master(const std::string& base, std::size_t master) {
  for (int i = 0;; ++i) {
    std::string name = base + ":" + std::to_string(i);
    if ((cluster_name_slot(name) >= 8192) == (master == 1)) return name;
  }
}

}  // namespace

TEST_SUITE_BEGIN("acl");

TEST_CASE("docs/acl.md shows the cluster member's rules and durable mode's right word for word") {
  const std::string doc = read_acl_doc();
  const std::string line = "ACL SETUSER locker reset on >CHANGE-ME " +
                           redsync::test::cluster_lock_acl_rules(redsync::script_mode::eval) + " " +
                           redsync::test::durable_acl_extra;
  CHECK_MESSAGE(doc.find(line + "\n") != std::string::npos, "docs/acl.md lacks the line: ", line);
}

TEST_CASE(
    "a user with exactly the documented cluster rights locks, wakes a waiter, locks names on two masters "
    "and locks durably on cluster members, with nothing refused") {
  acl_clusters c({redsync::test::durable_acl_extra}, "");
  redsync::Redsync rs(c.uris, fresh_nodes());
  const std::string base = unique_name("app:cluster-acl");
  const std::string name = app_name_on_master(base + "a", 0);

  auto m = rs.new_mutex(name, {.expiry = 2s});
  check_no_server_error(m.lock(redsync::context::timeout(20s)), "lock");
  check_no_server_error(m.extend(), "extend");
  // A waiter with a 20 s retry delay: only the release's sharded wake-up
  // hands it the lock within the bound below.
  auto w = rs.new_mutex(name, {.expiry = 2s, .tries = 100, .retry_delay = [](int) { return 20000ms; }});
  auto f = w.lock_future(redsync::context::timeout(30s));
  REQUIRE(wait_until(
      [&] {
        // The waiter subscribed on the master of the name's slot (node 0).
        return waiter_channels((*c.members[0])[0], "redsync:release:{" + name + "}", true) >= 1;
      },
      10s));
  const auto released_at = clock_type::now();
  check_no_server_error(m.unlock(redsync::context::timeout(10s)), "unlock");
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(clock_type::now() - released_at < 10s);
  check_no_server_error(f.get(), "woken waiter");
  check_no_server_error(w.unlock(redsync::context::timeout(10s)), "waiter's unlock");

  // Names on both masters of each member: one call per slot group.
  const std::vector<std::string> names{app_name_on_master(base + "b", 0), app_name_on_master(base + "c", 1)};
  auto multi = rs.new_multi_mutex(names, {.expiry = 2s});
  check_no_server_error(multi.lock(redsync::context::timeout(20s)), "multi-name lock");
  check_no_server_error(multi.unlock(redsync::context::timeout(10s)), "multi-name unlock");

  // WAIT 1.25 s: generous for a replica on a loaded machine.
  auto durable = rs.new_mutex(app_name_on_master(base + "d", 1),
                              {.expiry = 10s, .timeout_factor = 0.25, .durable_replicas = 1});
  check_no_server_error(durable.lock(redsync::context::timeout(20s)), "durable lock");
  check_no_server_error(durable.unlock(redsync::context::timeout(10s)), "durable unlock");
  CHECK(c.acl_denials() == 0);
}

TEST_CASE("a cluster user without +wait gets NOPERM from every member in durable mode, at once") {
  acl_clusters c({}, "");
  redsync::Redsync rs(c.uris, fresh_nodes());
  auto m = rs.new_mutex(unique_name("app:cluster-acl-nowait"),
                        {.expiry = 3s, .timeout_factor = 0.2, .durable_replicas = 1});
  // Brand-new records are repaired first; then every member answers.
  redsync::result r;
  const auto deadline = clock_type::now() + 20s;
  do {
    r = m.try_lock(redsync::context::timeout(10s));
  } while (r.nodes[0].status == redsync::node_status::excluded && clock_type::now() < deadline);
  CHECK(r.error == redsync::errc::no_quorum);
  for (const auto& n : r.nodes) {
    CHECK(n.status == redsync::node_status::reply_error);
    CHECK(n.error_class == redsync::server_error::noperm);
    CHECK_MESSAGE(n.message.find("NOPERM") == 0, n.message);
    CHECK_MESSAGE(
        n.message.find("(from WAIT 1 300, which mutex_options::durable_replicas sends)") != std::string::npos,
        n.message);
  }
  // Without durable mode too: every member has replicas, so the failover
  // check sends WAIT behind each acquisition (docs/cluster.md).
  auto plain =
      rs.new_mutex(unique_name("app:cluster-acl-nowait-plain"), {.expiry = 3s, .timeout_factor = 0.2});
  auto rp = plain.try_lock(redsync::context::timeout(10s));
  CHECK(rp.error == redsync::errc::no_quorum);
  for (const auto& n : rp.nodes) {
    CHECK(n.error_class == redsync::server_error::noperm);
    CHECK_MESSAGE(n.message.find("which the failover check of a cluster member with replicas sends") !=
                      std::string::npos,
                  n.message);
  }
}

TEST_CASE("a cluster user without +cluster|shards gets the refusal as each member's reason, not a hang") {
  // The router falls back to CLUSTER SLOTS only where SHARDS is unknown
  // (before Redis 7), not where it is refused.
  acl_clusters c({}, "+cluster|shards");
  redsync::Redsync rs(c.uris, fresh_nodes());
  auto m = rs.new_mutex(unique_name("app:cluster-acl-nomap"), {.expiry = 2s});
  const auto started = clock_type::now();
  auto r = m.try_lock(redsync::context::timeout(10s));
  CHECK(clock_type::now() - started < 10s);
  CHECK(r.error == redsync::errc::no_quorum);
  for (const auto& n : r.nodes) {
    CHECK(n.status != redsync::node_status::ok);
    CHECK_MESSAGE(n.message.find("no slot map") != std::string::npos, n.message);
    CHECK_MESSAGE(n.message.find("NOPERM") != std::string::npos, n.message);
    CHECK_MESSAGE(n.message.find("cluster|shards") != std::string::npos, n.message);
  }
}

TEST_SUITE_END();
