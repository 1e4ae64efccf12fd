#pragma once

// The rounds a mutex runs, built from its configuration: its scripts sent on
// its route with its command timeout, its quorum, fail-fast and node order,
// and the three ways its release goes out (awaited once, retried in the
// background, or fire-and-forget). Loop thread only.

#include "redlock/engine/round.hpp"
#include "redlock/mutex/mutex_state.hpp"
#include "redlock/mutex/slot_groups.hpp"

#include <redsync/error.hpp>

#include <cstddef>
#include <functional>

namespace redsync::detail {

using round_sender = std::function<void(std::size_t i, member_slot pool, command_callback done)>;

// Sends `call` to a node as this mutex does (its route, its timeout, one
// call per slot group on a cluster member: slot_groups.hpp, the member's
// answer combined by `classify`); a script fallback only while `wanted`
// says so (script_call.hpp).
round_sender script_sender(const mutex_state& st, const script_call& call, classify_fn classify,
                           fallback_wanted wanted = {});

// script_sender, with the failover check of a cluster member
// (durable_wait.hpp: a yes counts only with every listed replica's
// acknowledgement): for an extension, whose yes from a master already
// replaced would promise a validity that the promoted replica's older
// expiry does not keep. A standalone member gets script_sender's call.
round_sender failover_checked_sender(const mutex_state& st, const script_call& call, classify_fn classify,
                                     fallback_wanted wanted = {});

// A member's answer from its slot groups' answers (slot_groups.hpp's
// combine_answers with `classify`).
group_combiner member_answer(classify_fn classify);

// A round of `call` with the mutex's quorum, fail-fast and shuffle options.
// A round whose script may SET the lock key passes `wanted` (script_call.hpp).
round_spec mutex_round(const mutex_state& st, const script_call& call, classify_fn classify,
                       fallback_wanted wanted = {});
// The same round without its `send`, for a caller that sends per node.
round_spec mutex_round_without_sender(const mutex_state& st, classify_fn classify);

// The round that releases the current value (st.release_call), sent once.
round_spec release_round(const mutex_state& st);

// The round that undoes a failed attempt of the current value (st.undo()),
// sent once: what it won goes back to what the line's rules make of it,
// and its place in line stays (scripts.hpp, rule U).
round_spec undo_round(mutex_state& st);

// The undo to node `i`, sent once, nobody waiting for the reply; in order
// (send_script_in_order: the next attempt follows on the same connection).
void send_undo_unawaited(mutex_state& st, std::size_t i);

// Sends the release of the current value, retried in the background while a
// node does not answer (release_sender.cpp), until the key's expiry makes it
// moot or the next acquisition starts. Not for the releases between
// attempts: a retry could land after the next attempt's SET of the same
// value.
round_sender retried_release_sender(mutex_state& st);

// The retried release to every node, nobody waiting for the replies.
void release_everywhere_retried(mutex_state& st);

}  // namespace redsync::detail
