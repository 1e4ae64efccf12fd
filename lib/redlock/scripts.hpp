#pragma once

// The Lua scripts the Redlock flows run on each node, each with its SHA1, and
// the keys and channel derived from a lock name. script_call.hpp (included
// here: it defines lua_script) sends them.

#include "redlock/script_call.hpp"

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

// Acquisition with the fencing counter and a fair waiting line per name.
// KEYS = names (n), record, lines (n), leases (n);
// ARGV = value, expiry ms, arrival (µs), lease ms, "1" to wait in line,
// claim window ms (a head of line that leaves the lock free that long loses
// its place).
// Where SET NX won on every name: {token, record identity ('' if none), ms
// since it was first seen unverified (-1 if never), recorded window ms};
// else -2 (busy, first in every line), -1 (busy, others ahead) or nil (busy,
// not waiting).
const lua_script& acquire_script();

// Leaving the waiting lines. KEYS and ARGV as release_script's. Also passes
// on (as a release does) every name reserved for us meanwhile.
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

// Keys and channel derived from one lock name.
std::string line_key(std::string_view name);
std::string lease_key(std::string_view name);
std::string release_channel(std::string_view name);

// KEYS = names (n), lines (n), leases (n); ARGV = value, claim window ms,
// release channel of each name (n). For each name holding our value: if its
// line has a live waiter, reserves the key for the head of the line for the
// claim window (`reserved_value`) and publishes the head on the name's
// channel; else deletes the key. A name reserved for us (a release found
// us in line, but we got the lock elsewhere) is passed on the same way.
// Returns -1 if any name holds another value (left alone; a reservation
// does not count), else 1 if something of ours was released, else 0 (all
// missing or reserved).
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
