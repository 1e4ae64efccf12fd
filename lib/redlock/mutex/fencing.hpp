#pragma once

// The fencing token of an acquisition, from the counters its winning nodes
// answered, and the write-back that makes a quorum hold it.
//
// Each node where our SET won answered its counter (one per node, shared by
// all names) after incrementing it; the token is the maximum T over them.
// Claim: every later holder of this name gets a token > T, as long as the
// nodes that lost data since are a minority.
//
// Proof without data loss: before we report success, a quorum Q1 of nodes
// has counter >= T (either they answered T, or the write-back raised them to
// T while the key still held our value there). A later holder wins on a
// quorum Q2 of nodes whose votes count; Q1 and Q2 meet in some node x. On x,
// our SET (and write-back) ran before the later holder's SET NX could
// succeed, since our key had to be gone first; counters only grow, so its
// increment on x yields > T, and its token, a maximum that includes x, is
// > T. With data loss, x may have lost its counter: node_trust.hpp shows
// that such a node votes again only once repaired to >= T. The common case
// (a quorum already answered T) needs no second round trip.

#include "redlock/engine/round.hpp"
#include "redlock/mutex/mutex_state.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace redsync::detail {

struct token_votes {
  std::int64_t token = 0;       // the maximum counter among the winning nodes
  std::size_t at_token = 0;     // winning nodes that answered exactly `token`
  std::vector<bool> at_or_out;  // per node: no write-back needed (at token, or did not win)
};

// Reads the winning nodes' counters from an acquisition round.
token_votes count_token_votes(const tally& acquisition, std::size_t nodes);

// Raises the counter to `votes.token` on the winning nodes below it, only
// where the first name still holds `value`. `done(true)` once a quorum holds
// the token, `done(false)` when that became impossible. Loop thread.
void write_back_token(mutex_state& st, std::string_view value, const token_votes& votes,
                      std::function<void(bool quorum_holds_token)> done);

// The same for any holder (a semaphore's permit: semaphore_scripts.hpp):
// `spec` sends the holder's write-back script and classifies its answer
// (1 ok, 0 missing); `quorum` is the holder's.
void write_back_token(engine& eng, round_spec spec, std::size_t quorum, const token_votes& votes,
                      std::function<void(bool quorum_holds_token)> done);

}  // namespace redsync::detail
