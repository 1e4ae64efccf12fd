// redsync::parse_members and members_from_env: splitting a list of member
// URIs (REDSYNC_NODES, --nodes), where a cluster member's seeds are
// separated by commas too.
#include <redsync/error.hpp>
#include <redsync/members.hpp>
#include <redsync/options.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

using redsync::config_error;
using redsync::parse_members;
using strings = std::vector<std::string>;

namespace {

// The message of the config_error that parse_members(list) throws; fails
// the test when nothing (or something else) is thrown.
std::string list_error(std::string_view list) {
  try {
    const strings got = parse_members(list);
    FAIL_CHECK("no config_error for \"", std::string(list), "\", got ", got.size(), " members");
  } catch (const config_error& e) {
    return e.what();
  }
  return {};
}

bool list_error_has(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// Sets an environment variable for one test case, and restores it.
class env_var {
 public:
  env_var(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value == nullptr) {
      ::unsetenv(name);
    } else {
      ::setenv(name, value, 1);
    }
  }
  ~env_var() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  env_var(const env_var&) = delete;
  env_var& operator=(const env_var&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("a list of standalone URIs splits at every comma") {
  CHECK(parse_members("redis://a:1,rediss://b:2,unix:///tmp/r.sock") ==
        strings{"redis://a:1", "rediss://b:2", "unix:///tmp/r.sock"});
  CHECK(parse_members("redis://a:1") == strings{"redis://a:1"});
  CHECK(parse_members("unix:/tmp/r.sock,UNIX:/tmp/s.sock") ==
        strings{"unix:/tmp/r.sock", "UNIX:/tmp/s.sock"});
}

TEST_CASE("the pieces without a scheme after a cluster URI are its seeds") {
  // As `scripts/testbed up --cluster` prints REDSYNC_NODES.
  const strings testbed = parse_members(
      "redis+cluster://127.0.0.1:7902,127.0.0.1:7903,127.0.0.1:7904,"
      "redis+cluster://127.0.0.1:7905,127.0.0.1:7906,127.0.0.1:7907");
  CHECK(testbed == strings{"redis+cluster://127.0.0.1:7902,127.0.0.1:7903,127.0.0.1:7904",
                           "redis+cluster://127.0.0.1:7905,127.0.0.1:7906,127.0.0.1:7907"});
  CHECK(redsync::member_options::parse(testbed[1]).seeds.size() == 3);
}

TEST_CASE("a mixed list keeps each cluster member whole and every other URI apart") {
  CHECK(parse_members("redis://a:1,redis+cluster://b:2,c:3,rediss://d:4") ==
        strings{"redis://a:1", "redis+cluster://b:2,c:3", "rediss://d:4"});
  CHECK(parse_members("REDISS+CLUSTER://b:2,c:3?insecure=true,unix:///tmp/r.sock") ==
        strings{"REDISS+CLUSTER://b:2,c:3?insecure=true", "unix:///tmp/r.sock"});
  CHECK(parse_members("redis+cluster://a:1,redis+cluster://b:2") ==
        strings{"redis+cluster://a:1", "redis+cluster://b:2"});
}

TEST_CASE("IPv6 seeds in brackets continue a cluster URI") {
  const strings got = parse_members("redis+cluster://[::1]:7000,[::1]:7001,redis://[::1]:7002");
  CHECK(got == strings{"redis+cluster://[::1]:7000,[::1]:7001", "redis://[::1]:7002"});
  const auto seeds = redsync::member_options::parse(got[0]).seeds;
  REQUIRE(seeds.size() == 2);
  CHECK(seeds[1].host == "::1");
  CHECK(seeds[1].port == 7001);
}

TEST_CASE("a cluster member's password may hold a raw comma") {
  // The user info ends at the last '@', as member_options::parse reads it.
  const strings got = parse_members("redis+cluster://:pa,ss@b:2,c:3,redis://d:4");
  CHECK(got == strings{"redis+cluster://:pa,ss@b:2,c:3", "redis://d:4"});
  CHECK(redsync::member_options::parse(got[0]).seeds.at(0).password == "pa,ss");
}

TEST_CASE("spaces around members and seeds are dropped, not those inside a password") {
  CHECK(parse_members(" redis://a:1 ,\tredis+cluster://b:2 , c:3 , rediss://d:4\t") ==
        strings{"redis://a:1", "redis+cluster://b:2,c:3", "rediss://d:4"});
  const strings got = parse_members("redis+cluster://:pa , ss@b:2, c:3");
  CHECK(got == strings{"redis+cluster://:pa , ss@b:2,c:3"});
  CHECK(redsync::member_options::parse(got[0]).seeds.at(0).password == "pa , ss");
}

TEST_CASE("an empty member is an error that names its place") {
  CHECK(list_error("redis://a:1,,redis://b:2") == "node URI 2 of 3 is empty");
  CHECK(list_error("redis://a:1, ,redis://b:2") == "node URI 2 of 3 is empty");
  CHECK(list_error(",redis://a:1") == "node URI 1 of 2 is empty");
  // An empty piece ends a cluster member: it is not an empty seed.
  CHECK(list_error("redis+cluster://a:1,b:2,,redis://c:3") == "node URI 2 of 3 is empty");
  CHECK(list_error("") == "the list of node URIs is empty (expected URIs separated by ',')");
  CHECK(list_error("  ") == "the list of node URIs is empty (expected URIs separated by ',')");
}

TEST_CASE("a trailing comma is an error that says so") {
  CHECK(list_error("redis://a:1,redis://b:2,") == "node URI 3 of 3 is empty (the list ends with a ',')");
  CHECK(list_error("redis+cluster://a:1,b:2,") == "node URI 2 of 2 is empty (the list ends with a ',')");
}

TEST_CASE("a piece without a scheme that no cluster URI comes before is an error") {
  // The bug of issue 33: this list split at every comma.
  const std::string first = list_error("127.0.0.1:7902,redis://b:2");
  CHECK(list_error_has(first, "node URI 1 of 2: invalid node URI \"127.0.0.1:7902\": missing scheme"));
  CHECK(list_error_has(
      first, "only the seeds after a redis+cluster:// or rediss+cluster:// URI go without a scheme"));
  const std::string after_standalone = list_error("redis://a:1,b:2,redis://c:3");
  CHECK(list_error_has(after_standalone, "node URI 2 of 3: invalid node URI \"b:2\": missing scheme"));
  // Alone, the message is the parser's, with the hint.
  CHECK(list_error_has(list_error("127.0.0.1:7902"), "invalid node URI \"127.0.0.1:7902\": missing scheme"));
}

TEST_CASE("a member that does not parse is named by its place with the parser's message") {
  CHECK(list_error("redis://a:1,redis://b:x") ==
        "node URI 2 of 2: invalid node URI \"redis://b:x\": port \"x\" is not a number");
  const std::string seed = list_error("redis://a:1,redis+cluster://b:2,c:x,redis://d:4");
  CHECK(
      list_error_has(seed, "node URI 2 of 3: invalid cluster URI \"redis+cluster://b:2,c:x\": seed 2 (c:x)"));
  CHECK(list_error_has(list_error("redis://a:1,http://b:2"),
                       "node URI 2 of 2: invalid node URI \"http://b:2\""));
  // A single member: the parser's message as it is.
  CHECK(list_error("redis://b:x") == "invalid node URI \"redis://b:x\": port \"x\" is not a number");
}

TEST_CASE("errors about a list never show a password") {
  const std::string lists[] = {
      "redis://a:1,redis://:S3CRETpw@b:x",  "redis+cluster://:S3CRETpw@b:2,c:x",
      "redis://a:1,u:S3CRETpw@b:2",  // lone user info without a scheme
      "redis://:S3CR,ETpw@127.0.0.1:6379",  "redis://u:S3CR,E,Tpw@127.0.0.1:6379,redis://b:2",
      "redis://:S3CRETpw@a:1,,redis://b:2", "rediss://a:1?password=S3CRETpw&x=1,redis://b:2",
  };
  for (const std::string& list : lists) {
    const std::string m = list_error(list);
    INFO(list);
    INFO(m);
    CHECK_FALSE(m.empty());
    for (const char* piece : {"S3CR", "CRET", "ETpw"}) CHECK_FALSE(list_error_has(m, piece));
  }
  CHECK(list_error_has(
      list_error("redis://:S3CR,ETpw@127.0.0.1:6379"),
      "node URI 1 is cut short by a ',' (not shown: it may hold a password; write a ',' inside a "
      "URI as %2C)"));
  CHECK(list_error_has(list_error("redis+cluster://:S3CRETpw@b:2,c:x"),
                       "invalid cluster URI \"redis+cluster://:***@b:2,c:x\""));
}

TEST_CASE("members_from_env reads REDSYNC_NODES, and says when it is unset or empty") {
  {
    const env_var v("REDSYNC_NODES", "redis+cluster://127.0.0.1:7902,127.0.0.1:7903,redis://127.0.0.1:7001");
    CHECK(redsync::members_from_env() ==
          strings{"redis+cluster://127.0.0.1:7902,127.0.0.1:7903", "redis://127.0.0.1:7001"});
  }
  {
    const env_var v("REDSYNC_TEST_MEMBERS", "redis://a:1,,redis://:S3CRETpw@b:2");
    CHECK_THROWS_WITH_AS(redsync::members_from_env("REDSYNC_TEST_MEMBERS"),
                         "REDSYNC_TEST_MEMBERS: node URI 2 of 3 is empty", config_error);
  }
  {
    const env_var v("REDSYNC_TEST_MEMBERS", nullptr);
    CHECK_THROWS_WITH_AS(redsync::members_from_env("REDSYNC_TEST_MEMBERS"),
                         doctest::Contains("REDSYNC_TEST_MEMBERS is not set"), config_error);
  }
  {
    const env_var v("REDSYNC_TEST_MEMBERS", " ");
    CHECK_THROWS_WITH_AS(redsync::members_from_env("REDSYNC_TEST_MEMBERS"),
                         "REDSYNC_TEST_MEMBERS is empty (expected node URIs separated by ',')", config_error);
  }
  CHECK_THROWS_AS(redsync::members_from_env(nullptr), config_error);
  CHECK_THROWS_AS(redsync::members_from_env(""), config_error);
}
