#pragma once

// The Lua scripts the Redlock flows run on each node, each with its SHA1, and
// the keys and channel derived from a lock name. script_call.hpp (included
// here: it defines lua_script) sends them. The scripts' Lua is in lua/, one
// file per piece; embed_lua.py composes every script (and its cluster
// variant) from those pieces at build time and hashes it there.

#include "redlock/scripts/script_call.hpp"

#include <string>
#include <string_view>

namespace redsync::detail {

// Every lock script takes all of a lock's names as KEYS (several, sorted,
// for a multi-name lock) and is all-or-nothing on a node; per-name keys
// (waiting lines, leases) follow in the same order.

// The one record each node keeps for redsync (a hash, never expiring, one
// key however many names are locked): `fence`, the node's fencing counter,
// shared by every name; `run`, the server identity (run_id and replication
// id) the record was last verified for; `since`, when that identity was
// first seen unverified (server ms); `window`, the longest expiry any client
// has used on the node; `pending`, the repair's mark (when, for which
// identity), present only while a repair is under way. See node_trust.hpp.
inline constexpr std::string_view record_key = "redsync:node";

// ---- The waiting line's protocol ------------------------------------------
// Per lock name N, each node keeps:
//   N        the lock key: absent; a holder's value; or a reservation
//            R(w) = reserved_value(w) (a value no client can use), TTL set;
//   L(N)     the line (line_key): waiter value -> arrival (µs, client clock);
//   S(N)     the leases (lease_key): waiter value -> server ms until which
//            the waiter counts as live.
// A waiter is *live* on a node while it is in L and its lease has not run
// out; the *head* is the live waiter with the lowest (arrival, value). L and
// S live as long as the longest live lease (a join only lengthens their
// TTL), so a reservation, which lives as long as L, outlives every live
// waiter. Each script below is atomic on its node; these rules hold after
// every script, on every node:
//   R (reservation) a name no holder holds is reserved while its line has a
//     live waiter, and free otherwise. Every script that touches a name
//     restores R there (`settle`), retargeting a reservation to the current
//     head and publishing the head's value on the name's channel (a
//     wake-up) when it changes. Time alone can break R in two ways,
//     both after a crash: a holder's key expires while waiters live (the
//     name is free), or the head's lease runs out while the line lives on
//     for a longer lease of a waiter that left (the name stays reserved
//     for nobody live, refusing a plain SET NX until the line expires). The
//     next script on the name restores R.
//   H (head) only the live head of every line of the names (or anyone, on
//     names nobody lives in) may take them, and it may take a free name or
//     one reserved for anyone: no reservation is ever closed to the head.
//     Together with R, a client that skips the line (the MULTI/EXEC first
//     attempt, fast_acquire.hpp: SET NX) cannot take a name while a live
//     waiter is in its line, except in R's gap.
//   L (leaving) a waiter leaves a line only when it gives up, when its
//     acquisition is confirmed (a quorum, fencing written back, validity
//     left: leave_script), or when its lease runs out (it is gone). Winning
//     on some nodes does not take it out of the line there.
//   U (undo) a failed attempt gives back each name it won on a node by
//     applying R there: a waiter that won as the head gets its names back
//     as reservations for itself, so a failed attempt never hands a node
//     to the waiter behind it, and never costs its caller its place.
//   A (arrival) a waiter's arrival is the same number on every node. A
//     waiter that was in a line and finds itself gone from it (its lease ran
//     out: it was paused, or the node lost the line) goes to the back, with
//     this attempt's time as its new arrival on every node (a score only
//     ever moves back), so it never returns at its old rank and the nodes
//     keep agreeing on the order.
// Claims (tests/redis/redlock/line_explorer_test.cpp drives these scripts
// in chosen and random interleavings on real nodes and checks them):
//  - Mutual exclusion does not depend on the line: a holder's value is only
//    ever set on a free or reserved name, and only deleted by its holder
//    (or expiry).
//  - Progress: with live waiters whose arrivals agree, the earliest live
//    waiter W is the head of every line it is in on every node where it is
//    present; so once the holder releases (or its key expires), every node
//    W reaches ends up reserved for W or W's, and only W's attempt can
//    change that. W acquires once its attempt reaches a quorum of nodes
//    after the release. Others' failed attempts cannot take W's nodes (H),
//    W's own failed attempts give them back to W (U).
//  - Fairness: among live waiters that reach a quorum, the lock goes in
//    order of arrival, as read from each client's wall clock: a client whose
//    clock is behind by d is served as if it had come d earlier. A waiter
//    whose lease ran out (paused longer than its lease's slack) goes to the
//    back.
//  - A crashed head holds up a free lock until its lease runs out (a head
//    refreshes its lease at least every mutex_state::head_refresh; the
//    lease is twice the wait plus the command timeout plus 1 s).

// Acquisition with the fencing counter and the waiting line.
// KEYS = names (n), record, lines (n), leases (n), and on a cluster member
// the server mark's key (server_mark.hpp);
// ARGV = value, expiry ms, arrival (µs), lease ms, mode, fresh arrival (µs:
// this attempt's time), release channel of each name (n). Mode "0": do not
// wait (try_lock); "1": join (or stay in) every line at `arrival`; "2": as
// "1", but a line we are no longer in puts us at the back at `fresh
// arrival` (rule A; the client sends "2" where an earlier answer put us in
// line).
// Where we won every name: {token, record identity ('' if none), ms since it
// was first seen unverified (-1 if never), recorded window ms, 1 if we are
// in a line here (the head) else 0, and on a cluster member the server
// mark}. Else -2 (busy, first in every line),
// -1 (busy, others ahead), -4/-3 (the same, and we were put back at the end
// of a line: our arrival is now `fresh arrival`), nil (busy, not
// waiting), or -5: a name is held as a semaphore (its key holds the kind
// mark, semaphore_scripts.hpp rule X), answered before the caller joins a
// line or refreshes its lease, whatever the mode (only rule A may have
// moved it back in a line it was already in, which it still leaves when it
// gives up): the semaphore has no line to hand the name over, so a new
// waiter would only hold a place nobody serves.
const lua_script& acquire_script();

// Leaving the waiting lines. KEYS and ARGV as release_script's (ARGV[2]
// unused). Names holding our value are left alone (a confirmed holder
// leaves its lines); every other name is settled (rule R).
const lua_script& leave_script();

// Fencing write-back. KEYS = first name, record; ARGV = value, token. Only
// where the name still holds our value, raises the record's counter to at
// least the token. Returns 1 if the value was ours, else 0.
const lua_script& fence_script();

// KEYS = record; ARGV = random value, the connection's server identity ('' if
// unknown). Returns {fence, identity, since, server now ms, mark, window} as
// strings, '' for a missing field. A record not verified for that identity
// gets a new mark ("<server ms> <random> <identity>") unless it has one for
// that identity from the server's past; a verified record's `since` in the
// server's future is moved to now.
const lua_script& record_read_script();
// KEYS = record; ARGV = counter floor, identity, mark, since ms, window ms.
// Only while the record still carries that mark: raises the counter and the
// window to at least ARGV's, stamps identity and since unless already
// stamped for that identity, and removes the mark. Returns 1 if applied, 0
// if the mark was gone.
const lua_script& record_stamp_script();

// What a release leaves in a key for the head of its line: a value no
// client's lock value can be (it starts with a NUL byte, which
// options_check refuses in a lock value).
std::string reserved_value(std::string_view head);
inline constexpr char reserved_value_prefix[] = "\0redsync:next\0";

// A wake-up is published with PUBLISH on a standalone node, SPUBLISH on a
// cluster member (a PUBLISH there is broadcast to every node of the
// cluster; a sharded one stays on the shard of the name's slot, where the
// waiters subscribe: docs/cluster.md). A script that publishes has a
// cluster variant (lua_script::cluster) that differs only in this word
// (embed_lua.py: cluster_publish).

// Keys and channel derived from one lock name.
std::string line_key(std::string_view name);
std::string lease_key(std::string_view name);
std::string release_channel(std::string_view name);
// Where a release announces that it reserved the name for the waiter whose
// value has SHA1 `value_sha1` (hex): the release channel, ':', that SHA1.
// One channel per waiter, so a hand-over wakes the next waiter only, not
// every process waiting for the name (the same slot on a cluster member:
// the hash tag comes first). The SHA1, not the value, so that channel
// names (PUBSUB CHANNELS) never show a value that could release the lock.
inline std::string waiter_channel(std::string_view channel, std::string_view value_sha1) {
  std::string c(channel);
  c += ':';
  c += value_sha1;
  return c;
}

// KEYS = names (n), lines (n), leases (n); ARGV = value, "0" (release) or
// "1" (undo of a failed attempt, rule U), release channel of each name (n).
// Release: leaves every line, then lets go of each name holding our value
// or reserved for us (rule R: reserved for the live head, published, or
// deleted). Undo: keeps our place; each name holding our value is settled
// (reserved for the head, which may be us, or deleted); a name reserved for
// us stays so.
// Returns -1 if any name holds another holder's value (left alone; a
// reservation does not count), else 1 if some name held our value, else 0.
const lua_script& release_script();

// KEYS = the names, ARGV[1] = value, ARGV[2] = expiry in ms,
// ARGV[3] = "1" to re-create missing names (set-NX-on-extend), else "0".
// Returns 1 if every name is ours with its TTL now `expiry`, 0 if some name
// is missing, -1 if some name holds another value.
const lua_script& extend_script();

// KEYS = the names, ARGV[1] = value.
// Returns 1 if every name holds our value, -1 if some name holds another
// value, else 0 (some missing).
const lua_script& check_script();

}  // namespace redsync::detail
