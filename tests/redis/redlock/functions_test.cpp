// script_mode::functions (lib/redlock/scripts/script_call.hpp): scripts run as
// FCALL of function libraries loaded on first use, on real servers: loaded
// again after FUNCTION FLUSH, and a clear error when FUNCTION LOAD is
// refused by the ACL or the server has no FUNCTION command (renamed away,
// which models Redis < 7 on a real server). The documented ACL of this mode
// is proved in acl_test.cpp.

#include "fake_redis.hpp"
#include "fresh_nodes.hpp"
#include "lock_acl.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using redsync::script_mode;
using namespace redsync::test;

namespace {

const redsync::redsync_options functions_mode = fresh_nodes({.script_mode = script_mode::functions});

long long calls_everywhere(cluster& c, const std::string& command) {
  long long n = 0;
  for (std::size_t i = 0; i < c.size(); ++i) n += redis_client(c[i]).calls(command);
  return n;
}

std::size_t libraries_on(redsync::test::redis_server& s) {
  const auto r = redis_client(s).command({"FUNCTION", "LIST", "LIBRARYNAME", "redsync_*"});
  return r.elements.size();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_SUITE("functions") {
  TEST_CASE("in functions mode every operation runs as FCALL, never EVAL or EVALSHA") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), functions_mode);
    auto m = rs.new_mutex(unique_name("fn-basic"));
    auto locked = m.lock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(locked.ok(), locked.describe());
    CHECK(m.extend().ok());
    CHECK(m.valid().ok());
    CHECK(m.unlock(redsync::context{}).ok());
    CHECK(calls_everywhere(c, "evalsha") == 0);
    CHECK(calls_everywhere(c, "eval") == 0);
    CHECK(calls_everywhere(c, "fcall") > 0);
    // One library per script used, each loaded once per node.
    for (std::size_t i = 0; i < c.size(); ++i) {
      CHECK(libraries_on(c[i]) >= 3);
      CHECK(redis_client(c[i]).calls("function|load") == static_cast<long long>(libraries_on(c[i])));
    }
  }

  TEST_CASE("after FUNCTION FLUSH the libraries are loaded again and the call succeeds") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), functions_mode);
    auto m = rs.new_mutex(unique_name("fn-flush"));
    REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
    for (std::size_t i = 0; i < c.size(); ++i) {
      REQUIRE(redis_client(c[i]).command({"FUNCTION", "FLUSH"}).str == "OK");
      REQUIRE(libraries_on(c[i]) == 0);
    }
    auto extended = m.extend();
    CHECK_MESSAGE(extended.ok(), extended.describe());
    auto unlocked = m.unlock(redsync::context{});
    CHECK_MESSAGE(unlocked.ok(), unlocked.describe());
    for (std::size_t i = 0; i < c.size(); ++i) {
      CHECK(libraries_on(c[i]) >= 2);
      CHECK_FALSE(redis_client(c[i]).exists(m.name()));
    }
    auto again = rs.new_mutex(m.name());
    CHECK(again.lock(redsync::context::timeout(5s)).ok());
    CHECK(again.token() > m.token());
    CHECK(again.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a user whose ACL refuses FUNCTION LOAD gets a clear noperm error on every node, and no lock") {
    cluster c(3);
    std::vector<std::string> uris;
    auto commands = redsync::test::lock_acl_commands(script_mode::functions);
    commands.erase(std::find(commands.begin(), commands.end(), "+function|load"));
    for (std::size_t i = 0; i < c.size(); ++i) {
      std::vector<std::string> argv = {"ACL", "SETUSER", "nl", "reset", "on", ">nl-secret"};
      argv.insert(argv.end(), redsync::test::lock_acl_patterns.begin(),
                  redsync::test::lock_acl_patterns.end());
      argv.insert(argv.end(), commands.begin(), commands.end());
      REQUIRE(redis_client(c[i]).command(argv).str == "OK");
      uris.push_back("redis://nl:nl-secret@" + c[i].address());
    }
    redsync::Redsync rs(uris, functions_mode);
    auto m = rs.new_mutex(unique_name("app:fn-no-load"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    CHECK(r.error == redsync::errc::no_quorum);
    REQUIRE(r.nodes.size() == 3);
    for (const auto& n : r.nodes) {
      CHECK_MESSAGE(n.status == redsync::node_status::reply_error, n.address, ": ", to_string(n.status));
      CHECK_MESSAGE(n.error_class == redsync::server_error::noperm, n.message);
      CHECK_MESSAGE(contains(n.message, "FUNCTION LOAD"), n.message);
      CHECK_MESSAGE(contains(n.message, "script_mode"), n.message);
    }
    CHECK_FALSE(m.held());
  }

  TEST_CASE("a server without the FUNCTION command gets an error naming script_mode, and no lock") {
    // rename-command FUNCTION "" leaves FCALL but no way to load a library:
    // on a real server, the closest model of Redis < 7 for this mode.
    cluster c(3, {.extra_args = {"--rename-command", "FUNCTION", ""}});
    redsync::Redsync rs(c.uris(), functions_mode);
    auto m = rs.new_mutex(unique_name("fn-renamed"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    CHECK(r.error == redsync::errc::no_quorum);
    REQUIRE(r.nodes.size() == 3);
    for (const auto& n : r.nodes) {
      CHECK_MESSAGE(n.status == redsync::node_status::reply_error, n.address, ": ", to_string(n.status));
      CHECK_MESSAGE(contains(n.message, "script_mode is functions"), n.message);
      CHECK_MESSAGE(contains(n.message, "FUNCTION"), n.message);
      CHECK_MESSAGE(contains(n.message, "script_mode::eval"), n.message);
    }
    CHECK_FALSE(m.held());
    // The same servers serve the default mode.
    redsync::Redsync eval_rs(c.uris(), fresh_nodes());
    auto e = eval_rs.new_mutex(m.name());
    CHECK(e.lock(redsync::context::timeout(5s)).ok());
    CHECK(e.unlock(redsync::context{}).ok());
  }

  // -- a server too old for the mode (a fake peer: no real one here is) -----

  TEST_CASE("a node running Redis 4.0.9 is excluded with a reason naming the version and the minimum") {
    fake_redis node({.info_reply = fake_redis::bulk(
                         "# Server\r\nredis_version:4.0.9\r\nrun_id:" + std::string(40, 'a') + "\r\n")});
    redsync::Redsync rs({node.uri()});
    auto m = rs.new_mutex(unique_name("fake-old"), {.tries = 1});
    auto r = m.lock(redsync::context::timeout(5s));
    CHECK(r.error == redsync::errc::no_quorum);
    REQUIRE(r.nodes.size() == 1);
    CHECK(r.nodes[0].status == redsync::node_status::excluded);
    CHECK_MESSAGE(contains(r.nodes[0].message, "runs Redis 4.0.9"), r.nodes[0].message);
    CHECK_MESSAGE(contains(r.nodes[0].message, "needs Redis >= 5.0"), r.nodes[0].message);
    CHECK_FALSE(m.held());
  }
}
