#pragma once

// The semaphore's per-node protocol: its keys, its Lua scripts (each atomic
// on its node) and what their answers mean.
//
// Per semaphore name S, each node keeps, all in one hash tag {S}:
//   set_key(S)      a sorted set: member "<slot>:<permit id>", score the
//                   server ms at which that permit expires;
//   permits_key(S)  the number of permits k the holders agreed on;
//   line_key(S)     the waiting line (rule F): a sorted set of waiter
//                   values scored by arrival (the client's wall clock, the
//                   same number on every node);
//   leases_key(S)   a hash: each waiter's lease (server ms), refreshed by
//                   its attempts; a waiter past it is out of the line;
// and, in the name's lock key (the key a Mutex named S sets: S itself on a
// standalone node, cluster_lock_key(S) on a cluster member, whose hash tag
// is the set's), the kind mark (lua/kind_mark.lua: a value no client can
// use). All three live exactly as long as the latest permit in the set
// (every write sets their TTLs to it), so a semaphore nobody holds leaves
// nothing behind, and its k can change once every permit has ended.
// The fencing counter is the node record's (scripts.hpp: record_key), the
// mutex's own, with the same answer so node_trust judges the vote the same
// way (restart guard, repair of the counter).
//
// Invariants on a node, after every script (a permit is live while its
// score is in the server's future):
//   K  at most k live permits, where k is the stored k;
//   S  at most one live permit per slot 0..k-1 (what the fencing rule of
//      semaphore.hpp needs: a quorum is more than half the nodes, so two
//      holders of one slot at once would share a node that refused one);
//   T  a grant increments the record's counter, as the mutex's acquire does;
//   M  a client whose k differs from the stored k is refused while any
//      permit is live (a quorum of it would meet every live holder's);
//   X  (kind) a name is never held as a mutex and as a semaphore at once:
//      while a permit is live the lock key holds the kind mark, on which a
//      Mutex's SET NX fails (the MULTI/EXEC transaction's too:
//      fast_acquire.hpp) and its acquire script answers -5; and a permit is
//      granted only while the lock key is absent or holds the mark (a
//      holder's value or a waiter's reservation refuses it, {-3}). The
//      mark is written and checked in the same atomic step as the grant,
//      so on each node the two kinds exclude each other as two holders of
//      one kind do. A Mutex's own scripts read the mark as a value that is
//      not theirs: never deleted, extended or re-created over by them.
//      Clients of versions without the mark neither write nor check it.
//   F  (fair line) a permit is granted to a caller only while fewer live
//      waiters are ahead of it in the line than permits are free (k minus
//      the live permits): the earliest waiters take the free permits, a
//      newcomer that does not queue is behind everyone. A grant takes the
//      waiter out of the line (its permit now counts among the live ones);
//      the undo of a failed attempt puts it back at its arrival, which
//      leaves the set of waiters a permit is free for as it was. A release,
//      and a waiter leaving, wakes the one waiter that the change lets in
//      (on its own channel); a waiter nobody hears there (crashed, or not
//      subscribed yet) leaves the line, and a live one rejoins at its
//      arrival with its next attempt. The line is a fairness aid, never a
//      safety property: K, S and X do not depend on it.

#include "redlock/scripts/script_call.hpp"
#include "transport/reply.hpp"

#include <redsync/error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

std::string semaphore_set_key(std::string_view name);
std::string semaphore_permits_key(std::string_view name);
// The set's key on a cluster member: "redsync:sem:" + cluster_lock_key(name),
// so that the set, its permits key (+ ":permits") and the name's lock key,
// where the kind mark is kept, share one hash tag and one slot.
std::string cluster_semaphore_set_key(std::string_view name);
// The waiting line's keys (rule F): the set's key + ":line" / ":leases"
// (the set's hash tag, so its slot on a cluster member).
std::string semaphore_line_key(std::string_view set_key);
std::string semaphore_leases_key(std::string_view set_key);
// Where releases are announced: a waiter listens on this channel, ':', the
// SHA1 of its waiter value (hex), and a release tells only the waiter it
// lets in (payload: the freed slot, empty when a waiter left).
std::string semaphore_channel(std::string_view name);
// The set's member for a permit: "<slot>:<id>".
std::string permit_member(std::uint32_t slot, std::string_view id);

// KEYS = set, permits, lock key, record, line, leases (and the server
// mark's key on a cluster member: server_mark.hpp); ARGV = member, slot, k,
// expiry ms, waiter value ("" for a call that does not queue), arrival (µs
// of the wall clock, the same for every attempt of one call), lease ms,
// "1" to join the line (or stay in it) when refused, else "0", the channel.
// Refused by the line while permits are free, it tells the waiters ahead
// (a permit can come free by expiring, which wakes nobody), and a waiter
// that nobody hears on its channel is out of the line (rule F).
// Drops expired permits, then:
//   {-3}                      the lock key holds anything but the kind mark:
//                             held as a mutex (rule X), nothing written;
//   {-2, stored k}            k differs from the stored k (rule M), nothing written;
//   {-1, "s1,s2,...", open}   k live permits, the slot is live, or the
//                             line's earlier waiters take the free permits
//                             (rule F): refused; open is 1 when only the
//                             slot refused (a permit is free for us here),
//                             else 0. Joins the line if asked;
//   {token, record identity, ms since first seen unverified (-1 if never),
//    recorded window ms, "s1,s2,..."[, server mark]}   granted (the first
//                             four and the mark as the mutex's acquire
//                             answers, for node_trust).
// The slot list names the live slots of other permits.
const lua_script& semaphore_acquire_script();

// TEST ONLY (semaphore_test_access.hpp): the acquire script without rule S,
// a node then grants any slot while fewer than k permits are live. Unsafe by
// design: with a majority quorum it lets k+1 holders in, which the chaos
// meta-test must see. Not in the function library, so eval mode only.
const lua_script& semaphore_acquire_count_only_script();

// KEYS = set, permits, lock key, line, leases; ARGV = member, channel, k,
// and for the undo of a failed attempt whose waiter stays in line its
// waiter value, arrival and lease ms (else three empty strings). A release
// (no waiter) that removed a live permit wakes the waiter it lets in
// (rule F); an undo puts its waiter back in line and wakes nobody.
// Returns 1 if the permit was live and is now gone, else 0.
const lua_script& semaphore_release_script();

// KEYS as the release's; ARGV = waiter value, channel, k. Takes the waiter
// out of the line and wakes the waiter its place lets in. Returns 1 if it
// was in line, else 0.
const lua_script& semaphore_leave_script();

// KEYS = set, permits, lock key; ARGV = member, expiry ms. Returns 1 if the permit was
// live and now expires in `expiry`, else 0 (it is gone).
const lua_script& semaphore_extend_script();

// Fencing write-back (fencing.hpp). KEYS = set, record; ARGV = member,
// token. Only while the permit is live, raises the record's counter to at
// least the token. Returns 1 if it was live, else 0.
const lua_script& semaphore_fence_script();

// The acquire script's answer: ok (granted), taken (refused, for the
// slots or because the name is held as a mutex), else reply_error. A
// mismatch never reaches this: semaphore_answer() turns it into an error
// reply first.
node_status classify_semaphore_acquire(const reply& r);

// The acquire script refused because the name is held as a mutex ({-3}).
bool semaphore_held_as_mutex(const reply& r);

// What an acquire answer says beyond its status.
struct semaphore_answer {
  std::vector<std::uint32_t> others;        // live slots of other permits
  std::optional<long long> stored_permits;  // set when k differs (rule M)
  bool held_as_mutex = false;               // {-3} (rule X): says nothing of the slots
  bool open = false;                        // a grant, or refused for the slot only (rule F)
};
// nullopt for a reply that is none of the acquire script's answers.
std::optional<semaphore_answer> read_semaphore_answer(const reply& r);

}  // namespace redsync::detail
