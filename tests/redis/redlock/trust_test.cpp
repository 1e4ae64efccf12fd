// Whether a node's vote can be trusted when the client may not (or cannot)
// read the server's INFO: a least-privilege ACL user (docs/acl.md) runs every
// flow, a user short of a right fails loudly and closed, and servers whose
// INFO differs from Redis's (Valkey, Dragonfly; modelled by a fake peer,
// since no real server here can play them) are trusted or excluded as
// lib/redlock/trust/node_trust.hpp says.

#include "fake_redis.hpp"
#include "fresh_nodes.hpp"
#include "key_inspection.hpp"
#include "lock_acl.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// The minimal ACL of a lock user (docs/acl.md, tests/support/lock_acl.hpp),
// without its key and channel patterns.
const std::vector<std::string> lock_user_commands =
    redsync::test::lock_acl_commands(redsync::script_mode::eval);

std::vector<std::string> without(std::vector<std::string> rights, const std::string& right) {
  rights.erase(std::remove(rights.begin(), rights.end(), right), rights.end());
  return rights;
}

// Five real servers, each with the ACL user `locker` limited to the keys
// `app:*` and `redsync:node` and the channels `redsync:release:*`.
struct acl_cluster {
  cluster servers{5};
  std::vector<std::string> uris;

  explicit acl_cluster(const std::vector<std::string>& commands = lock_user_commands) {
    for (std::size_t i = 0; i < servers.size(); ++i) {
      std::vector<std::string> argv = {"ACL",   "SETUSER", lock_user,
                                       "reset", "on",      std::string(">") + lock_user_password};
      argv.insert(argv.end(), {"~app:*", "~redsync:node", "&redsync:release:*"});
      argv.insert(argv.end(), commands.begin(), commands.end());
      const auto r = redis_client(servers[i]).command(argv);
      REQUIRE_MESSAGE(r.type == redis_client::reply::kind::status, r.str);
      uris.push_back("redis://" + lock_user_info() + servers[i].address());
    }
  }

  // Entries in ACL LOG (denials: commands, keys and channels, inside scripts
  // too) summed over every node.
  long long acl_denials() {
    long long n = 0;
    for (std::size_t i = 0; i < servers.size(); ++i) {
      n += static_cast<long long>(redis_client(servers[i]).command({"ACL", "LOG"}).elements.size());
    }
    return n;
  }

  long long waiting_on_node0(const std::string& name) {
    return redis_client(servers[0]).command({"ZCARD", name + ":redsync-line"}).integer;
  }

  // Waiters listening for the name's releases, the fewest on any node.
  long long subscribers(const std::string& name) {
    long long least = -1;
    for (std::size_t i = 0; i < servers.size(); ++i) {
      const long long n = waiter_channels(servers[i], "redsync:release:" + name);
      least = least < 0 ? n : std::min(least, n);
    }
    return least;
  }

  bool key_on_any_node(const std::string& key) {
    for (std::size_t i = 0; i < servers.size(); ++i) {
      if (redis_client(servers[i]).exists(key)) return true;
    }
    return false;
  }
};

void check_no_noperm(const redsync::result& r) {
  for (const auto& n : r.nodes) {
    CHECK_MESSAGE(n.error_class != redsync::server_error::noperm, n.address, ": ", n.message);
  }
}

// Redis 7.0 reports a refusal inside a script as "ERR The user executing
// the script can't run this command or subcommand ..." (or "can't access at
// least one of the keys", "can't publish to the channel"), Redis 7.2 and
// Valkey as "ERR ACL failure in script: ...", and outside scripts "NOPERM ...".
bool names_acl_refusal(const std::string& message) {
  return message.find("NOPERM") != std::string::npos ||
         message.find("The user executing the script can't") != std::string::npos ||
         message.find("ACL failure in script") != std::string::npos;
}

const std::string valkey_run_id = "3f1c2b4a5d6e7f8091a2b3c4d5e6f708192a3b4c";

std::string valkey_info() {
  return fake_redis::bulk(
      "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\nrun_id:" +
      valkey_run_id + "\r\nuptime_in_seconds:1000\r\n");
}

std::string dragonfly_info() {
  return fake_redis::bulk(
      "# Server\r\nredis_version:7.4.0\r\ndragonfly_version:df-v1.21\r\nuptime_in_seconds:1000\r\n");
}

}  // namespace

TEST_SUITE("trust") {
  // -- a least-privilege ACL user on real servers ----------------------------

  TEST_CASE("a least-privilege ACL user can lock, extend, check, unlock and get a fencing token") {
    acl_cluster c;
    redsync::Redsync rs(c.uris, fresh_nodes());
    auto m = rs.new_mutex(unique_name("app:acl-basic"));
    auto locked = m.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(locked.ok(), locked.describe());
    check_no_noperm(locked);
    CHECK(m.token().value > 0);
    auto extended = m.extend();
    CHECK_MESSAGE(extended.ok(), extended.describe());
    check_no_noperm(extended);
    auto valid = m.valid();
    CHECK_MESSAGE(valid.ok(), valid.describe());
    check_no_noperm(valid);
    auto unlocked = m.unlock(redsync::context{});
    CHECK_MESSAGE(unlocked.ok(), unlocked.describe());
    check_no_noperm(unlocked);
    CHECK_FALSE(c.key_on_any_node(m.name()));
    CHECK(c.acl_denials() == 0);
  }

  TEST_CASE("a least-privilege ACL user's waiter is woken by the release and takes the lock over") {
    acl_cluster c;
    redsync::Redsync rs(c.uris, fresh_nodes());
    const auto name = unique_name("app:acl-handover");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context::timeout(5s)).ok());
    // A 5 s retry delay: only the release's wake-up (PUBLISH in the release
    // script, SUBSCRIBE on the waiter's side) brings it in within 1 s.
    auto waiter = rs.new_mutex(name, {.tries = 1000, .retry_delay = [](int) { return 5000ms; }});
    auto f = waiter.lock_future();
    REQUIRE(wait_until([&] { return c.waiting_on_node0(name) == 1 && c.subscribers(name) == 1; }, 2s));
    const auto released = clock_type::now();
    auto unlocked = holder.unlock(redsync::context{});
    REQUIRE_MESSAGE(unlocked.ok(), unlocked.describe());
    REQUIRE(f.wait_for(4s) == std::future_status::ready);
    const auto took = clock_type::now() - released;
    auto r = f.get();
    REQUIRE_MESSAGE(r.ok(), r.describe());
    check_no_noperm(r);
    CHECK(took < 1s);
    CHECK(waiter.token() > holder.token());
    CHECK(waiter.unlock(redsync::context{}).ok());
    CHECK(wait_until([&] { return c.waiting_on_node0(name) == 0; }, 2s));
    CHECK(c.acl_denials() == 0);
  }

  TEST_CASE("a least-privilege ACL user can lock, extend, check and unlock a multi-name lock") {
    acl_cluster c;
    redsync::Redsync rs(c.uris, fresh_nodes());
    const auto a = unique_name("app:acl-multi-a");
    const auto b = unique_name("app:acl-multi-b");
    auto m = rs.new_multi_mutex({a, b});
    auto locked = m.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(locked.ok(), locked.describe());
    check_no_noperm(locked);
    CHECK(c.key_on_any_node(a));
    CHECK(c.key_on_any_node(b));
    auto extended = m.extend();
    CHECK_MESSAGE(extended.ok(), extended.describe());
    auto valid = m.valid();
    CHECK_MESSAGE(valid.ok(), valid.describe());
    // A second holder of one of the names is refused while it is held.
    auto other = rs.new_mutex(b, {.tries = 1});
    CHECK(other.try_lock(redsync::context{}).busy());
    auto unlocked = m.unlock(redsync::context{});
    CHECK_MESSAGE(unlocked.ok(), unlocked.describe());
    check_no_noperm(unlocked);
    CHECK_FALSE(c.key_on_any_node(a));
    CHECK_FALSE(c.key_on_any_node(b));
    CHECK(c.acl_denials() == 0);
  }

  TEST_CASE("a user without +info gets every node excluded with a reason naming +info, and no lock") {
    acl_cluster c(without(lock_user_commands, "+info"));
    redsync::Redsync rs(c.uris, fresh_nodes());
    auto m = rs.new_mutex(unique_name("app:acl-no-info"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    CHECK(r.error == redsync::errc::no_quorum);
    REQUIRE(r.nodes.size() == 5);
    for (const auto& n : r.nodes) {
      CHECK_MESSAGE(n.status == redsync::node_status::excluded, n.address, ": ", to_string(n.status));
      CHECK_MESSAGE(n.message.find("+info") != std::string::npos, n.message);
    }
    CHECK_FALSE(m.held());
    // The failed attempt is released: nothing is left held.
    CHECK(wait_until([&] { return !c.key_on_any_node(m.name()); }, 2s));
  }

  TEST_CASE("a user without +hincrby gets a reply error naming the ACL refusal on every node, and no lock") {
    acl_cluster c(without(lock_user_commands, "+hincrby"));
    redsync::Redsync rs(c.uris, fresh_nodes());
    auto m = rs.new_mutex(unique_name("app:acl-no-hincrby"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    CHECK(r.error == redsync::errc::no_quorum);
    REQUIRE(r.nodes.size() == 5);
    for (const auto& n : r.nodes) {
      CHECK_MESSAGE(n.status == redsync::node_status::reply_error, n.address, ": ", to_string(n.status));
      CHECK_MESSAGE(names_acl_refusal(n.message), n.message);
    }
    CHECK_FALSE(m.held());
    // The script's SET ran before HINCRBY was refused (a script error does
    // not roll back), so only the release of the failed attempt removes it.
    CHECK(wait_until([&] { return !c.key_on_any_node(m.name()); }, 2s));
    CHECK(c.acl_denials() > 0);
  }

  // An ACL written before the transaction existed (no +multi, or no +exec):
  // the transaction is refused once per node, that attempt is released (the
  // SET NX ran alone where MULTI was refused) and retried at once with the
  // script, without counting as a try; the Redsync then uses the script
  // only. Checked for a try_lock, which has a single try.
  TEST_CASE("an ACL without +multi or +exec costs one refused transaction per node, then the script") {
    for (const char* right : {"+multi", "+exec"}) {
      CAPTURE(right);
      acl_cluster c(without(lock_user_commands, right));
      redsync::Redsync rs(c.uris, fresh_nodes());
      // The first lock (script) teaches the client every node's window.
      auto m = rs.new_mutex(unique_name("app:acl-old"), {.tries = 1});
      REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
      REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());
      for (int k = 0; k < 3; ++k) {
        auto r = m.try_lock(redsync::context::timeout(5s));
        REQUIRE_MESSAGE(r.ok(), r.describe());
        CHECK(r.attempts == 1);
        REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());
        CHECK(wait_until([&] { return !c.key_on_any_node(m.name()); }, 2s));
      }
      // Refused once per node, never again.
      const std::string verb = std::string(right).substr(1);
      for (std::size_t i = 0; i < c.servers.size(); ++i) {
        const auto stats = redis_client(c.servers[i]).info_field("commandstats", "cmdstat_" + verb);
        CHECK_MESSAGE(stats.find("rejected_calls=1,") != std::string::npos, stats);
      }
      auto other = rs.new_mutex(unique_name("app:acl-old-other"), {.tries = 1});
      CHECK(other.try_lock(redsync::context::timeout(5s)).ok());
      CHECK(other.unlock(redsync::context::timeout(5s)).ok());
    }
  }

  // Redis answers a refusal inside a script with "ERR ..." (see
  // names_acl_refusal); classify_server_error (lib/redlock/engine/round.cpp) maps it to
  // noperm.
  TEST_CASE("a command refused by the ACL inside a script is classified as noperm") {
    acl_cluster c(without(lock_user_commands, "+hincrby"));
    redsync::Redsync rs(c.uris, fresh_nodes());
    auto m = rs.new_mutex(unique_name("app:acl-noperm-class"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    REQUIRE_FALSE(r.ok());
    for (const auto& n : r.nodes) {
      CHECK_MESSAGE(n.error_class == redsync::server_error::noperm, n.address, ": ", n.message);
    }
  }

  // -- servers whose INFO differs (a fake peer, one node: quorum 1) ---------
  //
  // The restart guard stays on (the default), with its default window (the
  // longest expiry, 8 s): the fake's record was verified 10 minutes ago, so
  // the guard passes, and any exclusion below is the INFO's doing.

  TEST_CASE("a node whose INFO reads like Valkey's (run_id and valkey_version) votes and the lock succeeds") {
    fake_redis node({.info_reply = valkey_info(), .record_run = valkey_run_id});
    redsync::Redsync rs({node.uri()});
    auto m = rs.new_mutex(unique_name("fake-valkey"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    REQUIRE(r.nodes.size() == 1);
    CHECK_MESSAGE(r.ok(), r.describe());
    CHECK(r.nodes[0].status == redsync::node_status::ok);
    CHECK(m.token().value == 1);
    CHECK(node.calls("INFO") >= 1);
    CHECK(node.acquisitions() == 1);
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a node whose INFO has no run_id (like Dragonfly's) is excluded and the lock fails") {
    fake_redis node({.info_reply = dragonfly_info()});
    redsync::Redsync rs({node.uri()});
    auto m = rs.new_mutex(unique_name("fake-dragonfly"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    CHECK(r.error == redsync::errc::no_quorum);
    REQUIRE(r.nodes.size() == 1);
    CHECK(r.nodes[0].status == redsync::node_status::excluded);
    CHECK_MESSAGE(r.nodes[0].message.find("no run_id") != std::string::npos, r.nodes[0].message);
    CHECK(node.acquisitions() == 1);  // it said yes; the yes did not count
    CHECK_FALSE(m.held());
  }

  TEST_CASE("a node that refuses INFO is excluded with a reason naming +info and the lock fails") {
    fake_redis node({.info_reply = "-NOPERM this user has no permissions to run the 'info' command\r\n"});
    redsync::Redsync rs({node.uri()});
    auto m = rs.new_mutex(unique_name("fake-noperm"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    CHECK(r.error == redsync::errc::no_quorum);
    REQUIRE(r.nodes.size() == 1);
    CHECK(r.nodes[0].status == redsync::node_status::excluded);
    CHECK_MESSAGE(r.nodes[0].message.find("+info") != std::string::npos, r.nodes[0].message);
    CHECK(r.nodes[0].message.find("NOPERM") != std::string::npos);
    CHECK(node.acquisitions() == 1);
    CHECK_FALSE(m.held());
  }
}
