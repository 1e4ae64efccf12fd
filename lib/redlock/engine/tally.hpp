#pragma once

// What one round's answers came to (round.hpp): plain values, so that the
// decisions taken on them (acquisition_steps.hpp) need no engine.

#include <redsync/error.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace redsync::detail {

// Per-node statuses counted so far.
struct tally {
  std::vector<node_result> nodes;   // in node order
  std::vector<long long> integers;  // a node's integer reply, or the first element of its array reply
  std::size_t ok = 0;
  std::size_t taken = 0;
  std::size_t missing = 0;
  std::size_t failed = 0;   // reply_error, timeout, unreachable
  std::size_t pending = 0;  // not answered yet (not_awaited in the report)
  std::size_t excluded = 0;
  // Of `taken`: refusals because the name is held as the other kind of lock
  // (round_spec::other_kind), and what such a node's result says.
  std::size_t other_kind = 0;
  std::string other_kind_why{};

  // Nodes whose answer is known (not pending, not excluded).
  std::size_t answered() const noexcept { return ok + taken + missing + failed; }
};

}  // namespace redsync::detail
