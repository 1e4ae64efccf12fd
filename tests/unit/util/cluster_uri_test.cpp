#include "util/cluster_uri.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <doctest/doctest.h>

#include <string>
#include <string_view>

using redsync::config_error;
using redsync::node_options;
using namespace redsync::detail;

namespace {

std::string cluster_uri_error(std::string_view uri) {
  try {
    parse_cluster_uri(uri);
  } catch (const config_error& e) {
    return e.what();
  }
  FAIL("no config_error for ", uri);
  return {};
}

bool has_part(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a cluster URI names its seeds, which share credentials and parameters") {
  CHECK(is_cluster_uri("redis+cluster://a:7000"));
  CHECK(is_cluster_uri("REDISS+CLUSTER://a:7000"));
  CHECK_FALSE(is_cluster_uri("redis://a:7000"));

  auto seeds = parse_cluster_uri("redis+cluster://u:pw@10.0.0.1:7000,10.0.0.2:7001,host3");
  REQUIRE(seeds.size() == 3);
  CHECK(seeds[0].address() == "10.0.0.1:7000");
  CHECK(seeds[1].address() == "10.0.0.2:7001");
  CHECK(seeds[2].address() == "host3:6379");
  for (const node_options& s : seeds) {
    CHECK(s.username == "u");
    CHECK(s.password == "pw");
    CHECK_FALSE(s.tls.enabled);
  }

  seeds = parse_cluster_uri("rediss+cluster://[::1]:7000,h:7001/0?ca=/etc/ca.pem");
  REQUIRE(seeds.size() == 2);
  CHECK(seeds[0].address() == "[::1]:7000");
  CHECK(seeds[1].tls.enabled);
  CHECK(seeds[1].tls.ca_file == "/etc/ca.pem");
}

TEST_CASE("a seed given twice counts once") {
  CHECK(parse_cluster_uri("redis+cluster://h:1,h:1,h:2").size() == 2);
}

TEST_CASE("a bad cluster URI is rejected with a message naming it and the bad part, never a password") {
  CHECK(has_part(cluster_uri_error("redis+cluster://"), "no seed node"));
  CHECK(has_part(cluster_uri_error("redis+cluster://:pw@/0"), "no seed node"));
  const std::string stray = cluster_uri_error("redis+cluster://a:1,,b:2");
  CHECK(has_part(stray, "invalid cluster URI \"redis+cluster://a:1,,b:2\""));
  CHECK(has_part(stray, "seed 2 is empty"));
  const std::string port = cluster_uri_error("redis+cluster://:S3CRETpw@a:1,b:x");
  CHECK(has_part(port, "seed 2 (b:x)"));
  CHECK(has_part(port, "port \"x\" is not a number"));
  CHECK_FALSE(has_part(port, "S3CRETpw"));
  CHECK(has_part(cluster_uri_error("redis+cluster://a:1/3"), "db 3: a cluster has only db 0"));
  CHECK(has_part(cluster_uri_error("redis://a:1"), "expected redis+cluster:// or rediss+cluster://"));
}

TEST_CASE("a cluster URI given where one node is expected says it names a cluster member") {
  try {
    node_options::parse("redis+cluster://a:1,b:2");
    FAIL("no config_error");
  } catch (const config_error& e) {
    CHECK(has_part(e.what(), "\"redis+cluster\" names a cluster member"));
  }
}

TEST_CASE("member_options::parse takes a node or a cluster member, as Redsync's list does") {
  const auto node = redsync::member_options::parse("redis://h:7001");
  CHECK_FALSE(node.cluster);
  REQUIRE(node.seeds.size() == 1);
  CHECK(node.seeds[0].address() == "h:7001");

  const auto cluster = redsync::member_options::parse("rediss+cluster://h:7001,h:7002?insecure=true");
  CHECK(cluster.cluster);
  REQUIRE(cluster.seeds.size() == 2);
  CHECK(cluster.seeds[1].tls.insecure_skip_verify);

  CHECK_THROWS_AS(redsync::member_options::parse("redis+cluster://a:1,b:x"), config_error);
  CHECK_THROWS_AS(redsync::member_options::parse("redis://a:x"), config_error);
}
