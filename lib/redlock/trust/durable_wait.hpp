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
//
// The failover check (cluster members; docs/cluster.md, "The failover
// check"). A Redis Cluster master that was paused or cut off past the
// node-timeout is replaced by one of its replicas, but it does not know
// that until it hears from the cluster, and meanwhile runs what waits in
// its sockets: a script from a client whose map still names it gets "yes"
// from a server that is no longer the slot's master, and its keys and
// counter are thrown away when it rejoins as a replica. So on a cluster
// member a yes to an acquisition or an extension counts only when, right
// after the script, on the same connection, `WAIT r t` answered at least r,
// r being the replicas the member's map lists (not failed) for the slot's shard
// (and at least durable_replicas). Why that shows the server was still the
// slot's master after the script ran: a replica that acknowledged the
// script's writes was replicating from that server after they were made,
// so it was not promoted before them; the promoted replica of a failover
// stops replicating from the old master when promoted, and every other
// live replica switches to the new master when it learns of the promotion.
// So an old master whose r replicas (every replica that could be promoted,
// as the map lists them) all acknowledged had not been replaced when the
// script ran, and every replica that could be promoted holds the script's
// writes. Assumptions, stated in docs/cluster.md: a replica that is not
// listed (online or loading) in the member's map is not promoted (the map is read
// again whenever a WAIT falls short, after every MOVED, after a master did
// not answer, and at least every 5 s while commands flow); a replica does not keep replicating from a master
// it saw replaced. A shard without replicas cannot fail over: no WAIT. A master whose replicas are unknown (a
// MOVED named it since the last map read) gets no vote until the map was read, nor does a script that a
// MOVED or ASK sent on to another master than the one whose replicas were counted (durable_spec::master:
// with no replica listed for the map's owner, no WAIT was even sent), unless no WAIT was asked for and the
// map, as the MOVED left it, lists no replica for the new owner (a migration to a known master without
// replicas). Loop thread only.

#include "redlock/scripts/script_call.hpp"
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
  // Set by the failover check: the member's map does not know the slot's
  // master's replicas, so a yes cannot count (no WAIT is sent).
  bool replicas_unknown = false;
  // Which rule asks for the WAIT, for messages: durable mode, or the
  // failover check of a cluster member (which asks for more).
  bool failover_check = false;
  // Cluster member: the master (host:port) whose replicas `replicas`
  // counts. A script a MOVED or ASK sent to another master gets no vote:
  // that master's replicas are not what was counted (none, even, when the
  // map's owner has no replicas and no WAIT was sent).
  std::string master;

  explicit operator bool() const noexcept { return replicas > 0 || replicas_unknown || !master.empty(); }
};

// The spec of a mutex's options: off, or WAIT with the configured timeout
// (default: half the per-node command timeout, at least 1 ms).
durable_spec durable_spec_of(const mutex_options& o, std::chrono::microseconds command_timeout);

// The WAIT a yes from `to` needs: `durable` (durable_spec_of) on a
// standalone member; on a cluster member at least the replicas the map
// lists, not failed, for the slot's shard (the failover check above), with
// `durable`'s timeout or else half the command timeout.
durable_spec wait_needed(const durable_spec& durable, member_slot to,
                         std::chrono::microseconds command_timeout);

// send_script with the spec's WAIT behind each form sent; `is_yes` says
// which script answers are votes to confirm.
void send_script_durable(script_mode mode, member_slot pool, std::uint64_t route, const script_call& call,
                         std::chrono::microseconds timeout, command_callback done, fallback_wanted wanted,
                         const durable_spec& spec, node_status (*classify)(const reply&));

}  // namespace redsync::detail
