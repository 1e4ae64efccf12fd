#pragma once

// The uncontended acquisition without a Lua script: one transaction
//   MULTI; SET name value NX PX expiry; HINCRBY record fence 1;
//   HMGET record run since window; TIME; EXEC
// on a node, read back in the acquire script's shape, so everything after
// the round (quorum, fencing, the restart guard) is the same for both.
//
// Why it is as safe as the script (the arguments the acquire script, fencing
// and node_trust rely on, one by one):
//  - Mutual exclusion: the key is set only by SET NX, which fails while the
//    key holds any value: a holder's, a reservation a release left for
//    the head of the waiting line (scripts.hpp: release_script), or the
//    kind mark of a semaphore's live permits (semaphore_scripts.hpp, rule
//    X: a name is never a mutex and a semaphore at once). Only the
//    acquire script converts a reservation: for the waiter it names, or for
//    anyone once that waiter has left the line. The transaction's nil does
//    not say which: a waiting lock learns it from the script that follows
//    (-5 for the mark); a try_lock, which sends no script after it, reads
//    the mark as busy.
//  - Fencing: EXEC runs the queued commands as one step, so the counter is
//    incremented after our SET NX succeeded and before any other command
//    on the node: the token is read in the same atomic step as the win, as in
//    the script. Where the SET lost, the counter still grows; the fencing
//    claim (fencing.hpp) needs only that counters never go down.
//  - Restart guard: the record's identity, `since` and window are read in
//    that same step, and the node's server clock (TIME) with them, so the
//    vote carries what the script would return. The script also raises the
//    recorded window to the expiry; the transaction cannot. So a vote whose
//    recorded window is below the lock's expiry does not count
//    (node_trust::exclude_yes), and the transaction is only sent to a node
//    whose last vote showed a window of at least the expiry
//    (node_trust::window_covers); elsewhere the script runs and raises it.
//  - Partial failure: a command that fails inside EXEC (the record is of
//    the wrong type) does not undo the SET, exactly as a script error does
//    not: the answer is an error reply, and the acquisition releases such a
//    node (acquisition.cpp, step 5).
//  - The fair line: a newcomer's SET NX fails while a holder or a
//    reservation is in place, so it cannot overtake waiters after a release.
//    It can when a holder's key expired instead of being released, or when
//    a reservation ran out because its head vanished: the line is fair
//    only between live clients that release their locks.
// Single-name locks only: a multi-name lock must win every name or none,
// which SET NX per name cannot do atomically.

#include "transport/node_pool.hpp"
#include "transport/reply.hpp"

#include <cstdint>
#include <string_view>

namespace redsync::detail {

// The transaction for one acquisition, and how many replies it has.
wire_command encode_fast_acquire(std::string_view name, std::string_view value, std::string_view expiry_ms);
inline constexpr std::uint32_t fast_acquire_replies = 6;

// DISCARD, sent after a transaction answered with an error: see
// acquisition.cpp.
wire_command discard_command();

// EXEC's answer in the acquire script's shape: {token, record identity ('' if
// none), ms since the identity was first seen unverified (-1 if never),
// recorded window ms} where SET won; nil where it lost; an error reply for
// anything else (an error inside the transaction, a malformed record),
// naming what was wrong. Pure; consumes `exec` (the vote reuses its storage).
reply fast_acquire_answer(reply&& exec);

}  // namespace redsync::detail
