// Test helpers for the NOSCRIPT-ordering tests (review_test, line_attack_test):
// three nodes, the last reached through a proxy that can slow it down, the
// connections and records warmed before the lock under test, and a node's
// script cache emptied but for one script.
#pragma once

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "tcp_proxy.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

namespace redsync::test {

/// The URIs of `c`'s nodes, the last one's replaced by `slow`'s (a proxy to it).
inline std::vector<std::string> uris_with_last_via(const cluster& c, const tcp_proxy& slow) {
  std::vector<std::string> uris = c.uris();
  uris.back() = "redis://127.0.0.1:" + std::to_string(slow.port());
  return uris;
}

/// Three servers `c`, the last reached through `slow`, a proxy that can
/// delay it, and a Redsync `rs` over them: a fixture for TEST_CASE_FIXTURE.
struct slow_last_node {
  cluster c{3};
  tcp_proxy slow{c[2].port()};
  redsync::Redsync rs{uris_with_last_via(c, slow), fresh_nodes()};
};

/// Warms `rs`'s connections and node records with a lock of a fresh name
/// (from `base`) and a 10 s expiry, taken and released: the recorded windows
/// (10 s) stay below a later lock's longer expiry, so that lock's first
/// attempt is the acquire script, not the transaction.
inline void warm_with_10s_lock(redsync::Redsync& rs, const char* base) {
  auto warm = rs.new_mutex(unique_name(base), {.expiry = std::chrono::seconds(10)});
  REQUIRE(warm.lock(redsync::context::timeout(std::chrono::seconds(5))).ok());
  REQUIRE(warm.unlock(redsync::context::timeout(std::chrono::seconds(5))).ok());
}

/// Empties `node`'s script cache (as a restart does), then loads `kept` (one
/// of lib/redlock/scripts.hpp's scripts) back, as if some client had run it since.
template <class Script>
void flush_scripts_but(const redis_server& node, const Script& kept) {
  redis_client n(node);
  REQUIRE(n.command({"SCRIPT", "FLUSH"}).str == "OK");
  REQUIRE(n.command({"SCRIPT", "LOAD", std::string(kept.source)}).str == kept.sha1);
}

}  // namespace redsync::test
