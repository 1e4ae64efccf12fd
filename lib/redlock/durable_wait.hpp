#pragma once

// Durable mode (mutex_options::durable_replicas; docs/cluster.md, "Durable
// mode"): an acquisition's script is followed, on the same connection, by
// `WAIT numreplicas timeout`, and the member's yes counts only when at least
// numreplicas replicas acknowledged it.
//
// Why on the same connection, pipelined: WAIT waits for the replication
// offset of the last write *of its own client*. A WAIT sent on another
// connection (or on a new one after a reconnection, whose client wrote
// nothing) counts replicas that acknowledged nothing of ours and would
// answer at once. Written right behind the script in the same write, both
// travel on one connection: if it drops, both fail. A fallback (EVAL after
// NOSCRIPT, FCALL after FUNCTION LOAD) gets its own WAIT behind it, and only
// the WAIT behind the form that answered is read. On a cluster member the
// WAIT goes to the same slot's master; a WAIT answered by another master
// than the script (a MOVED or ASK sent the script elsewhere) is a non-vote.
//
// Invariants:
//  - a yes passes only with a WAIT answer >= numreplicas from the master
//    that ran the script; anything else (fewer, an error such as NOPERM, no
//    answer) turns the yes into an error reply "durable: ..." (or, for a
//    WAIT the server refused, its error text first, then the WAIT; a non-vote,
//    undone like any failed node: acquisition.cpp, group_votes.cpp);
//  - an answer that is not a yes passes unchanged, at once;
//  - `done` runs exactly once, after the WAIT's answer for a yes, so the
//    validity (measured from before the send) includes the WAIT.
// Loop thread only.

#include "redlock/script_call.hpp"
#include "transport/reply.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <chrono>
#include <cstdint>

namespace redsync::detail {

struct durable_spec {
  int replicas = 0;                   // 0 = off
  std::chrono::milliseconds wait{0};  // WAIT's own timeout, >= 1 ms
  wire_command wait_command;          // WAIT replicas wait_ms

  explicit operator bool() const noexcept { return replicas > 0; }
};

// The spec of a mutex's options: off, or WAIT with the configured timeout
// (default: half the per-node command timeout, at least 1 ms).
durable_spec durable_spec_of(const mutex_options& o, std::chrono::microseconds command_timeout);

// send_script with the spec's WAIT behind each form sent; `is_yes` says
// which script answers are votes to confirm.
void send_script_durable(script_mode mode, member_slot pool, std::uint64_t route, const script_call& call,
                         std::chrono::microseconds timeout, command_callback done, fallback_wanted wanted,
                         const durable_spec& spec, node_status (*classify)(const reply&));

}  // namespace redsync::detail
