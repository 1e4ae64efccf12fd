// Why a round failed an operation: holder_failure and acquire_failure.

#include "redlock/mutex/failure_reasons.hpp"

namespace redsync::detail {

errc holder_failure(const tally& t, std::size_t quorum) {
  const std::size_t not_ours = t.taken + t.missing;
  if (not_ours > t.nodes.size() - quorum) return t.taken > 0 ? errc::taken : errc::expired;
  return errc::no_quorum;
}

errc acquire_failure(const tally& t, std::size_t n, std::size_t q) {
  if (t.ok >= q) return errc::validity_elapsed;
  if (t.other_kind > n - q) return errc::kind_clash;
  const std::size_t unusable = t.failed + t.excluded + t.pending;
  if (t.taken > 0 && unusable <= n - q) return errc::busy;
  return errc::no_quorum;
}

}  // namespace redsync::detail
