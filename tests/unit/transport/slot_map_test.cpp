#include "transport/slot_map.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace redsync::detail;

namespace {

reply str(std::string s) {
  reply r;
  r.type = reply::kind::string;
  r.str = std::move(s);
  return r;
}
reply num(long long n) {
  reply r;
  r.type = reply::kind::integer;
  r.integer = n;
  return r;
}
reply arr(std::vector<reply> e) {
  reply r;
  r.type = reply::kind::array;
  r.elements = std::move(e);
  return r;
}
reply node(std::string endpoint, long long port, std::string role, std::string health = "online") {
  return arr({str("id"), str("id-" + std::to_string(port)), str("port"), num(port), str("ip"), str(endpoint),
              str("endpoint"), str(endpoint), str("role"), str(std::move(role)), str("health"),
              str(std::move(health))});
}

}  // namespace

TEST_CASE("CLUSTER SHARDS: each shard's online master serves its slot ranges") {
  const reply shards = arr({
      arr({str("slots"), arr({num(0), num(99), num(200), num(16383)}), str("nodes"),
           arr({node("10.0.0.2", 7001, "replica"), node("10.0.0.1", 7000, "master")})}),
      arr({str("slots"), arr({num(100), num(199)}), str("nodes"), arr({node("?", 7002, "master")})}),
  });
  std::string error;
  const auto m = parse_cluster_shards(shards, "seed-host", false, error);
  REQUIRE(m);
  REQUIRE(m->masters.size() == 2);
  CHECK(m->masters[0].host == "10.0.0.1");
  CHECK(m->masters[0].port == 7000);
  CHECK(m->masters[0].id == "id-7000");
  CHECK(m->masters[1].host == "seed-host");  // unknown endpoint: the node asked
  CHECK(m->owner[0] == 0);
  CHECK(m->owner[150] == 1);
  CHECK(m->owner[16383] == 0);
  CHECK(m->uncovered() == 0);
}

TEST_CASE("CLUSTER SHARDS: a shard whose master failed serves nothing") {
  const reply shards = arr(
      {arr({str("slots"), arr({num(0), num(16383)}), str("nodes"), arr({node("h", 1, "master", "fail")})})});
  std::string error;
  const auto m = parse_cluster_shards(shards, "h", false, error);
  REQUIRE(m);
  CHECK(m->uncovered() == 16384);
  CHECK(m->shards == 1);  // still a shard: it counts for the failover check
}

TEST_CASE("the failover check's count: a master's replicas are those its shard does not list as failed") {
  const reply shards =
      arr({arr({str("slots"), arr({num(0), num(8191)}), str("nodes"),
                arr({node("h", 2, "replica"), node("h", 1, "master"), node("h", 3, "replica", "fail"),
                     node("h", 4, "replica", "loading")})}),
           arr({str("slots"), arr({num(8192), num(16383)}), str("nodes"), arr({node("h", 5, "master")})})});
  std::string error;
  auto m = parse_cluster_shards(shards, "h", false, error);
  REQUIRE(m);
  REQUIRE(m->masters.size() == 2);
  // The failed replica is not counted; the one "loading" is (a replica in
  // its first synchronisation, or whose offset gossip has not brought yet,
  // may be promoted).
  CHECK(m->masters[0].replicas == 2);
  CHECK(m->masters[1].replicas == 0);  // no replica: it cannot fail over
  CHECK(m->shards == 2);
  // A master only a MOVED named: its replicas are unknown until a map read.
  const std::size_t moved_to = m->master_at("h", 2);
  CHECK(m->masters[moved_to].replicas == -1);
  // CLUSTER SLOTS lists a range's replicas after its master.
  const reply slots = arr(
      {arr({num(0), num(16383), arr({str("a"), num(1)}), arr({str("r"), num(9)}), arr({str("s"), num(8)})})});
  const auto s = parse_cluster_slots(slots, "seed", error);
  REQUIRE(s);
  CHECK(s->masters[0].replicas == 2);
}

TEST_CASE("CLUSTER SLOTS: each range's first node is its master") {
  const reply slots =
      arr({arr({num(0), num(8191), arr({str("a"), num(1), str("ida")}), arr({str("r"), num(9)})}),
           arr({num(8192), num(16383), arr({str(""), num(2)})})});
  std::string error;
  const auto m = parse_cluster_slots(slots, "seed", error);
  REQUIRE(m);
  REQUIRE(m->masters.size() == 2);
  CHECK(m->masters[0].id == "ida");
  CHECK(m->masters[1].host == "seed");
  CHECK(m->owner[8192] == 1);
}

TEST_CASE("a reply that is no map is refused with the reason") {
  reply err;
  err.type = reply::kind::error;
  err.str = "ERR This instance has cluster support disabled";
  std::string error;
  CHECK_FALSE(parse_cluster_shards(err, "h", false, error));
  CHECK(error == err.str);
  CHECK_FALSE(parse_cluster_slots(arr({arr({num(5), num(1), arr({str("a"), num(1)})})}), "h", error));
  CHECK(error.find("bad slot range 5-1") != std::string::npos);
}

TEST_CASE("MOVED and ASK name the slot and the node; anything else is no redirection") {
  auto r = parse_redirect("MOVED 3999 127.0.0.1:6381");
  REQUIRE(r);
  CHECK_FALSE(r->ask);
  CHECK(r->slot == 3999);
  CHECK(r->host == "127.0.0.1");
  CHECK(r->port == 6381);
  r = parse_redirect("ASK 1 [::1]:7000");
  REQUIRE(r);
  CHECK(r->ask);
  CHECK(r->host == "::1");
  r = parse_redirect("MOVED 2 :7000");  // Redis 7: the same host as the node that answered
  REQUIRE(r);
  CHECK(r->host.empty());
  CHECK_FALSE(parse_redirect("MOVED 16384 h:1"));
  CHECK_FALSE(parse_redirect("MOVED x h:1"));
  CHECK_FALSE(parse_redirect("MOVED 1 h:"));
  CHECK_FALSE(parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot"));
  CHECK_FALSE(parse_redirect("CLUSTERDOWN The cluster is down"));
}
