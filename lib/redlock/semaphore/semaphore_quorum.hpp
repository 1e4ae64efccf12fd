#pragma once

// Quorum arithmetic of a counting semaphore: k permits over N independent
// masters. Pure, no I/O, unit-tested without a server.
//
// Each node grants at most k live permits (the acquire script refuses the
// k+1st), and a holder holds its permit on q nodes. m holders at once need
// m*q grants, and the N nodes have at most k*N to give, so m <= k*N/q. At
// most k holders exist exactly when (k+1)*q > k*N, i.e. q > k*N/(k+1); the
// least such q is floor(k*N/(k+1)) + 1. It is never above N (k*N/(k+1) < N),
// it is the usual majority N/2 + 1 for k = 1, and all N nodes for k >= N-1.
//
// A majority is not enough once k >= 2: with N = 3 and k = 2, three holders
// can hold the node sets {1,2}, {2,3} and {1,3}, each node granting exactly
// two permits, and 3 > k holders exist at once (max_holders(3, 2, 2) == 3).
// The bound asks for all 3 nodes there.
//
// (The acquire script also keeps each permit's slot exclusive on a node,
// which the fencing rule needs: semaphore_scripts.hpp. The count bound
// above does not rely on slots.)

#include <redsync/semaphore.hpp>

#include <cstddef>

namespace redsync::detail {

/// The most permits a semaphore may have (public: the CLI checks -n
/// against it). The acquire script reads every live permit of the
/// semaphore on each call, so its cost grows with k.
inline constexpr int max_permits = Semaphore::max_permits;

/// The least quorum that keeps at most k holders: floor(k*N/(k+1)) + 1,
/// capped at N (a cap never reached, see above). Preconditions: n >= 1,
/// 1 <= k <= max_permits.
constexpr std::size_t semaphore_quorum(std::size_t n, std::size_t k) noexcept {
  const std::size_t q = k * n / (k + 1) + 1;
  return q < n ? q : n;
}

/// The most holders that can hold a permit at once when every node grants at
/// most k and each holder needs q of the n nodes: floor(k*n/q). q >= 1.
constexpr std::size_t max_holders(std::size_t n, std::size_t k, std::size_t q) noexcept {
  return k * n / q;
}

/// The quorum a semaphore of `permits` over `nodes` nodes uses: the bound
/// when `requested` is 0, else `requested`. Throws config_error naming the
/// bad value and the bound for permits < 1 or > max_permits, and for a
/// requested quorum below the bound (unsafe: it names how many holders it
/// would allow) or above `nodes`.
std::size_t checked_semaphore_quorum(std::size_t nodes, int permits, std::size_t requested);

}  // namespace redsync::detail
