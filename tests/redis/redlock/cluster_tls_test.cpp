// Cluster members over TLS (rediss+cluster://): clusters whose nodes talk
// TLS on the bus too (tls-cluster yes), so their maps announce each
// master's TLS port next to its plain one; the router must pick the TLS
// port for a rediss member (lib/transport/slot_map.cpp). Against real
// local clusters; the harness forms them over the plain ports.
#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "test_ca.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "redlock/scripts/cluster_keys.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_lock_key;
using redsync::detail::cluster_name_slot;
using namespace redsync::test;

TEST_CASE("a lock over TLS cluster members reaches each slot's master on its TLS port") {
  test_ca ca;
  const issued_cert cert = ca.issue();
  cluster_config cfg{.masters = 3};
  cfg.server.extra_args = {"--tls-cluster", "yes", "--tls-replication", "yes"};
  cfg.server.tls = tls_server_config{cert.cert_file, cert.key_file, ca.ca_file(), false};
  std::vector<std::unique_ptr<redis_cluster>> cls;
  std::vector<std::string> uris;
  for (int i = 0; i < 3; ++i) {
    cls.push_back(std::make_unique<redis_cluster>(cfg));
    uris.push_back("rediss+cluster://127.0.0.1:" + std::to_string((*cls.back())[0].tls_port()) +
                   "?ca=" + ca.ca_file());
  }
  redsync::Redsync rs(uris, fresh_nodes());
  const std::string name = unique_name("cluster-tls");
  auto m = rs.new_mutex(name, {.expiry = 10s});
  const auto r = m.lock(redsync::context::timeout(20s));
  REQUIRE_MESSAGE(r.ok(), r.describe());
  const std::string key = cluster_lock_key(name);
  const std::uint16_t slot = cluster_name_slot(name);
  REQUIRE(r.nodes.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    redis_cluster& cl = *cls[i];
    const auto& owner = cl[cl.owner(slot)];
    CAPTURE(i);
    CHECK(r.nodes[i].status == redsync::node_status::ok);
    // The master answered on its TLS port, not on the plain one the
    // harness uses.
    CHECK(r.nodes[i].shard == "127.0.0.1:" + std::to_string(owner.tls_port()));
    CHECK(redis_client(owner).get(key) == m.value());
  }
  const auto u = m.unlock(redsync::context::timeout(10s));
  CHECK_MESSAGE(u.ok(), u.describe());
  for (std::size_t i = 0; i < 3; ++i) {
    redis_cluster& cl = *cls[i];
    CHECK_FALSE(redis_client(cl[cl.owner(slot)]).exists(key));
  }
}
