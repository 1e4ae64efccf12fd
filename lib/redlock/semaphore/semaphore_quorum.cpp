// The semaphore's quorum, checked once when a Semaphore is made.

#include "redlock/semaphore/semaphore_quorum.hpp"

#include <redsync/error.hpp>

#include <fmt/format.h>

namespace redsync::detail {

std::size_t checked_semaphore_quorum(std::size_t nodes, int permits, std::size_t requested) {
  if (permits < 1 || permits > max_permits)
    throw config_error(fmt::format("semaphore permits = {}: must be in 1..{}", permits, max_permits));
  const auto k = static_cast<std::size_t>(permits);
  const std::size_t bound = semaphore_quorum(nodes, k);
  if (requested == 0) return bound;
  if (requested > nodes)
    throw config_error(fmt::format("semaphore_options.quorum = {}: above the {} nodes", requested, nodes));
  if (requested < bound)
    throw config_error(fmt::format(
        "semaphore_options.quorum = {}: unsafe for {} permits over {} nodes, where up to {} holders could "
        "each hold {} nodes with no node granting more than {} permits; it must be at least {} (the least "
        "q with q > permits * nodes / (permits + 1))",
        requested, k, nodes, max_holders(nodes, k, requested), requested, k, bound));
  return requested;
}

}  // namespace redsync::detail
