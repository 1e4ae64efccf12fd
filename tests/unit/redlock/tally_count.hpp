// Test support for the state machines' tests: one node's answer added to a
// made-up round tally, in the bucket the round itself counts it in
// (lib/redlock/engine/round.cpp).
#pragma once

#include "redlock/engine/tally.hpp"

#include <redsync/error.hpp>

namespace redsync::test {

inline void count_answer(detail::tally& t, node_status status, long long integer) {
  redsync::node_result r;
  r.status = status;
  t.nodes.push_back(r);
  t.integers.push_back(integer);
  switch (status) {
    case node_status::ok: ++t.ok; break;
    case node_status::taken: ++t.taken; break;
    case node_status::missing: ++t.missing; break;
    case node_status::excluded: ++t.excluded; break;
    case node_status::not_awaited: ++t.pending; break;
    default: ++t.failed; break;
  }
}

}  // namespace redsync::test
