#pragma once

// The harness starts its redis-servers moments before a test locks. The
// restart guard (on by default) rightly keeps a node whose record was
// stamped less than the longest expiry ago out of every quorum, so tests
// that are not about the guard turn it off.
//
// Brand-new nodes also have no redsync record yet, and the fencing counters
// of a brand-new cluster can only be set up while every node answers (see
// lib/redlock/trust/node_trust.hpp). A test that takes nodes down before its first lock
// primes the records first, as a deployment's first client would.

#include "redis_client.hpp"
#include "redis_server.hpp"

#include <redsync/redsync.hpp>

#include <stdexcept>
#include <string>
#include <vector>

namespace redsync::test {

inline redsync::redsync_options fresh_nodes(redsync::redsync_options o = {}) {
  o.restart_guard = false;
  return o;
}

/// Locks and unlocks once with every node up, which stamps every node's record.
inline void prime_records(const std::vector<std::string>& uris) {
  redsync::Redsync rs(uris, fresh_nodes());
  // A short expiry: the nodes record the longest expiry any client used,
  // which becomes their restart guard window and repair delay.
  // Brand-new nodes vote once their counters were repaired, one repair delay
  // (about that expiry) after they were first seen: keep trying within the
  // deadline rather than for a fixed number of tries, which a loaded machine
  // (sanitizers, parallel builds) can use up first.
  auto m = rs.new_mutex("redsync-test:prime", {.expiry = std::chrono::milliseconds(300), .tries = 1000});
  auto r = m.lock(redsync::context::timeout(std::chrono::seconds(5)));
  if (!r) throw std::runtime_error("prime_records: " + r.describe());
  (void)m.unlock(redsync::context::timeout(std::chrono::seconds(5)));
}

/// Every node's record as if verified just now (`since` = the node's time).
/// prime_records() stamps brand-new records as verified since time 0, which
/// needs no guard window (lib/redlock/trust/node_trust.hpp, "Never used"); a test
/// about the window of a record repaired moments ago stamps it so.
inline void stamp_record_now(const redis_server& server) {
  redis_client node(server);
  const auto time = node.command({"TIME"});
  const long long ms = std::stoll(time.elements[0].str) * 1000 + std::stoll(time.elements[1].str) / 1000;
  node.command({"HSET", "redsync:node", "since", std::to_string(ms)});
}
inline void stamp_records_now(cluster& c) {
  for (std::size_t i = 0; i < c.size(); ++i) stamp_record_now(c[i]);
}

}  // namespace redsync::test
