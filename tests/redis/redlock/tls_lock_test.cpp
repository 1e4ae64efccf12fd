// The whole Redlock flow over TLS: five redis-servers that the library
// reaches only through `rediss://` URIs carrying a test CA.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "test_ca.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

config tls_config(test_ca& ca) {
  const issued_cert cert = ca.issue();
  return config{.tls = tls_server_config{cert.cert_file, cert.key_file, ca.ca_file(), false}};
}

std::vector<std::string> tls_uris(const cluster& c, const test_ca& ca) {
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < c.size(); ++i) uris.push_back(c[i].tls_uri("?ca=" + ca.ca_file()));
  return uris;
}

}  // namespace

TEST_SUITE("tls_lock") {
  TEST_CASE("lock, extend and unlock over five TLS nodes set and clear the key on every node") {
    test_ca ca;
    cluster c(5, tls_config(ca));
    redsync::Redsync rs(tls_uris(c, ca), fresh_nodes());
    const auto name = unique_name("tls-roundtrip");
    auto m = rs.new_mutex(name, {.expiry = 3s});

    const auto r = m.lock(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    REQUIRE(r.nodes.size() == 5);
    for (const auto& n : r.nodes) CHECK(n.status == redsync::node_status::ok);
    for (std::size_t i = 0; i < c.size(); ++i) CHECK(redis_client(c[i]).get(name) == m.value());

    const auto e = m.extend(redsync::context::timeout(5s));
    CHECK_MESSAGE(e.ok(), e.describe());

    redsync::Redsync other(tls_uris(c, ca), fresh_nodes());
    auto rival = other.new_mutex(name);
    const auto busy = rival.try_lock(redsync::context::timeout(5s));
    CHECK_FALSE(busy.ok());
    CHECK(busy.error == redsync::errc::busy);

    const auto u = m.unlock(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(u.ok(), u.describe());
    for (std::size_t i = 0; i < c.size(); ++i) CHECK_FALSE(redis_client(c[i]).exists(name));
    const auto taken = rival.try_lock(redsync::context::timeout(5s));
    CHECK_MESSAGE(taken.ok(), taken.describe());
  }

  TEST_CASE(
      "a lock over TLS reaches its quorum while two nodes hang in the handshake, which the result names") {
    test_ca ca;
    cluster c(5, tls_config(ca));
    const auto uris = tls_uris(c, ca);
    prime_records(uris);
    c[3].pause();
    c[4].pause();
    redsync::redsync_options o = fresh_nodes();
    o.connect_timeout = 300ms;
    redsync::Redsync rs(uris, o);
    auto m = rs.new_mutex(unique_name("tls-frozen"), {.expiry = 8s, .tries = 3});
    const auto r = m.lock(redsync::context::timeout(10s));
    REQUIRE_MESSAGE(r.ok(), r.describe());
    int hung = 0;
    for (const auto& n : r.nodes) {
      if (n.message.find("TLS handshake") != std::string::npos) ++hung;
    }
    CHECK_MESSAGE(hung == 2, r.describe());
    CHECK(m.unlock(redsync::context::timeout(5s)).ok());
    c[3].resume();
    c[4].resume();
  }
}
