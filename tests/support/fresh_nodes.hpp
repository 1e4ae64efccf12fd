#pragma once

// The harness starts its redis-servers moments before a test locks. The
// restart guard (on by default) rightly keeps a node that started less than
// the longest expiry ago out of every quorum, so tests that are not about
// the guard turn it off.

#include <redsync/options.hpp>

namespace redsync::test {

inline redsync::redsync_options fresh_nodes(redsync::redsync_options o = {}) {
  o.restart_guard = false;
  return o;
}

}  // namespace redsync::test
