#pragma once

// Why a round left an operation without its quorum, from the round's tally
// alone: pure, shared by the mutex's and the semaphore's operations and by
// the acquisition's steps (acquisition_steps.hpp).

#include "redlock/engine/tally.hpp"

#include <redsync/error.hpp>

#include <cstddef>

namespace redsync::detail {

// Why a holder's step (release, extend, check) failed. We only claim
// "taken" or "expired" when so many nodes said the key is not ours (gone or
// someone else's) that no quorum of nodes can still hold it; when the nodes
// that did not answer could still make a quorum with the ones that said
// "ours", the answer is no_quorum: we cannot tell (a holder whose quorum
// was exactly three of five, one of them since killed, is not told its lock
// "expired").
errc holder_failure(const tally& t, std::size_t quorum);

// Why an acquisition's attempt failed (a mutex's or a semaphore's, with
// quorum q of n nodes). "busy" means the other holders are what stood in
// the way: the nodes that failed or were left out could not have made up
// the quorum on their own. "kind_clash" means the refusals because the name
// is held as the other kind did: without those nodes no quorum was
// possible, whatever the others said.
errc acquire_failure(const tally& t, std::size_t n, std::size_t q);

}  // namespace redsync::detail
