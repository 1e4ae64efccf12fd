#pragma once

// The keys of a lock name on a member that is a Redis Cluster, and where
// that member keeps its node records (docs/cluster.md). A standalone member
// keeps the names of scripts.hpp exactly: deployed clients interoperate.
//
// Layout. Every key a script, function or MULTI touches for one call must
// hash to one slot (else the cluster answers CROSSSLOT), so all of a name's
// keys carry one hash tag:
//   a name with a hash tag (util/cluster_slot.hpp: "orders:{42}") keeps it:
//     NAME, NAME:redsync-line, NAME:redsync-leases, channel
//     redsync:release:NAME;
//   any other name is wrapped whole: {NAME}, {NAME}:redsync-line,
//     {NAME}:redsync-leases, channel redsync:release:{NAME}.
//   a name that is empty or starts with '}' (whose "{NAME}" would have an
//     empty tag) is prefixed instead: {~}NAME, {~}NAME:redsync-line, ...
// Every derived key starts with the lock key (the channel after a prefix
// with no brace), and the lock key's first '{' is followed by a non-empty
// text and a '}', so every one of them has the lock key's hash tag and its
// slot, whatever braces the name holds ("a{}b" becomes "{a{}b}", whose tag
// is "a{"). Two names can share keys on a cluster member: "a" and "{a}" are
// the same lock there, as are "}x" and "{~}}x" (never two locks under one
// key: this only ever excludes more).
// The slot of a name is a function of the name alone, so it is the same on
// every cluster member of the set.
//
// Node records. A cluster member keeps one record per slot, named
// redsync:node:{T} with T = slot_tag(s), so that it lives in slot s with
// the keys of every name of s and one script can run on both. Write
// rec(m, s) for member m's record for slot s; for a standalone member,
// rec(m, s) is its one record redsync:node for every s. Each rec(m, s) is a
// node record exactly as node_trust.hpp describes (fence, run, since,
// window, pending), kept by the master that serves s, stamped with that
// master's identity (run_id and replication id). So:
//  * Failover is a restart. A replica promoted for s has another run_id
//    and a new replication id; the record it inherited (or lost) names the
//    old master, so rec(m, s) is unverified, and node_trust's rules apply
//    per (m, s) unchanged: no vote from m for names of s until its counter
//    was repaired and the guard window has passed. Writes the old master
//    acknowledged but did not replicate (lock keys, counter increments) are
//    exactly the "lost data" of a restart.
//  * A slot migrated to another master (resharding) is judged the same way:
//    its record arrives naming the old master's identity. That is safe
//    (the migration may race writes) and costs m's vote for names of s for
//    one guard window.
//
// Tokens. A lock over names in slots S (one slot for a single name) takes
// its token as today: on each member m it wins, every rec(m, s), s in S, is
// incremented in the same all-or-nothing step as the names of s (one call
// per slot, fast_acquire.hpp's or the script's), m's vote is the largest of
// those counters, and the token T is the largest vote among the winners. The
// write-back (fencing.hpp) raises, on a quorum of winners, every rec(m, s)
// for s in S to at least T (one fence call per slot; for one slot this is
// today's write-back). In the code (group_votes.hpp, slot_groups.hpp): a
// member answers per slot group and its yes is the yes of every group, so
// its counted vote means every rec(m, s), s in S, was incremented and is
// trusted; a winner needs no write-back only if every one of its groups'
// counters is already T, else it gets one fence call per group and counts
// towards the quorum only if every one of them succeeded.
//
// Claim: once a token T was granted for a lock over slots S, every later
// grant of a lock over slots S' that meets S yields a token > T, under
// node_trust.hpp's assumptions read per (member, slot), and the failover
// check's (durable_wait.hpp: a replica the member's map does not list online
// is not promoted; a replica does not keep replicating from a master it saw
// replaced), under which a master already replaced never casts a counted
// vote (before the check, a paused master that resumed after its promotion
// answered with its own pre-pause counter: issue 32): for each slot, the
// members whose rec(m, s) lost data (a restart, a failover, a migration)
// since the acquisition of T began are a minority; no client uses an
// expiry longer than the repair delay; and the clock assumption holds for
// the master serving s. Proof. Fix a slot s in S ∩ S'. T was granted once a
// quorum Q1 of members held rec(m, s) >= T (the write-back raised every
// slot of S there, so s among them). The later grant wins on a quorum Q2 of
// members whose rec(m, s) counted, meeting Q1 in some x. Everything
// node_trust.hpp's proof says of x's one record now holds of rec(x, s):
// the repair of rec(x, s) reads rec(y, s) of the other members, which is
// the counter every grant touching s raised. So rec(x, s) >= T before the
// later grant's increment of it, the later vote of x is at least that
// increment, > T, and the later token, the largest winning vote, is > T.
//
// What the claim does not say: tokens of locks with disjoint slot sets are
// unrelated (each slot counts on its own; with only standalone members
// every lock shares the one record, and the claim is node_trust.hpp's).
// Fencing compares tokens of one resource, held under one name, and a name
// has one slot, so a storage service that checks tokens per name is served.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

// The lock key of `name` on a cluster member: the name itself when it has a
// hash tag, "{~}" + name when it is empty or starts with '}', else
// "{" + name + "}". Its slot is the name's slot.
std::string cluster_lock_key(std::string_view name);

// The slot of every key of `name` on a cluster member.
std::uint16_t cluster_name_slot(std::string_view name);

// A cluster member's node record for `slot`: redsync:node:{slot_tag(slot)}.
std::string cluster_record_key(std::uint16_t slot);

// The names of one lock that share a slot, in the order given.
struct slot_group {
  std::uint16_t slot = 0;
  std::vector<std::string> names;
};

// Groups a lock's names by slot, groups in ascending slot order (the order
// multi-slot calls are made in, so every client takes slots in one order).
std::vector<slot_group> group_by_slot(const std::vector<std::string>& names);

}  // namespace redsync::detail
