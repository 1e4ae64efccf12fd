// Test helpers for attacks on cluster members: a client with a short guard
// window, and a wait until every member's vote counts for a mutex.
#pragma once

#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <chrono>

namespace redsync::test {

/// Options with a short guard window, so that a member votes again soon
/// after a failover or a repair.
inline redsync::redsync_options short_guard() {
  redsync::redsync_options opts;
  opts.restart_guard = true;
  opts.restart_guard_window = std::chrono::milliseconds{1500};
  return opts;
}

/// Locks and unlocks `m` until every member's vote counted: the slot is then
/// verified for this client, with the masters it sees now. False after
/// `bound`.
inline bool all_vote(redsync::Mutex& m, std::chrono::milliseconds bound = std::chrono::seconds{30}) {
  return wait_until(
      [&] {
        auto r = m.lock(redsync::context::timeout(std::chrono::seconds{20}));
        if (!r.ok()) return false;
        bool all = true;
        for (const auto& n : r.nodes) all = all && n.status == redsync::node_status::ok;
        (void)m.unlock(redsync::context::timeout(std::chrono::seconds{5}));
        return all;
      },
      bound);
}

}  // namespace redsync::test
