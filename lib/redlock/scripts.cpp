// The Lua sources of the lock scripts that read or write a waiting line
// (acquire, release, leave), each script's SHA1 (computed once), and the
// keys and channel derived from a lock name. The holder's extend and check
// are in holder_scripts.cpp, the node record's scripts in
// record_scripts.cpp.

#include "redlock/scripts.hpp"

#include "redlock/script_cache.hpp"
#include "util/sha1.hpp"

namespace redsync::detail {

namespace {

// Every lock script takes the lock's names as KEYS (one for a plain lock,
// several for a multi-name lock, always in sorted order) and is
// all-or-nothing on a node. Per-name keys follow the names in the same order.

// The pieces every script that reads a waiting line shares: the server
// clock (read at most once, before any write) and the live head of a line.
// Each script that uses them defines `n` and `line(i)`, `leases(i)` first,
// and has the names as its first KEYS.
// A key holding `reserved_prefix .. value` is reserved for the waiter with
// that value (see release_body): it is nobody's lock, and only that
// waiter's acquisition may take it.
constexpr std::string_view line_prelude = R"lua(
local reserved_prefix = '\0redsync:next\0'
local now = nil
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
-- The oldest waiter of line i whose lease has not run out (expired ones go).
local function live_head(i)
  while true do
    local first = redis.call('ZRANGE', line(i), 0, 0)[1]
    if not first then
      return nil
    end
    if tonumber(redis.call('HGET', leases(i), first) or '0') >= clock() then
      return first
    end
    redis.call('ZREM', line(i), first)
    redis.call('HDEL', leases(i), first)
  end
end
-- Lets go of name i: reserves it for the live head of its line for the
-- claim window and announces the head on the name's channel, or deletes it
-- when nobody waits.
local function pass_on(i, channel, claim_ms)
  local head = nil
  if redis.call('EXISTS', line(i)) == 1 then
    head = live_head(i)
    -- A head an earlier release already reserved the name for, whose claim
    -- window passed without it coming (it vanished, or cannot reach us),
    -- loses its place here, as in the acquire script's blocked branch.
    -- Otherwise, under traffic that never runs that branch (try_lock and
    -- first attempts win by SET NX once a reservation expired), every
    -- release would reserve the name for it again until its lease ran out.
    if head then
      local had = redis.call('HMGET', leases(i), '\0reserved', '\0free')
      if had[1] == head and had[2] and clock() - tonumber(had[2]) >= tonumber(claim_ms) then
        redis.call('ZREM', line(i), head)
        redis.call('HDEL', leases(i), head)
        head = live_head(i)
      end
    end
  end
  -- A node over its maxmemory refuses the reservation's SET (eval mode):
  -- the release still lets go, by deleting the name.
  if head and redis.pcall('SET', KEYS[i], reserved_prefix .. head, 'PX', claim_ms).err then
    redis.call('DEL', KEYS[i])
  elseif head then
    -- The head's claim window starts now: if it does not come, the next
    -- waiter may take the name once the window has passed (acquire_body).
    redis.pcall('HSET', leases(i), '\0free', clock(), '\0reserved', head)
    redis.call('PUBLISH', channel, head)
  else
    redis.call('DEL', KEYS[i])
  end
end
)lua";

// Compare-and-delete: only our value is ever deleted. The three-way answer
// lets unlock tell "expired" (0) from "taken" (-1); a key reserved for a
// waiter counts as expired (it is nobody's lock, and our own earlier release
// may have reserved it).
// KEYS = names (n), their waiting lines (n), their leases (n); ARGV = value,
// claim window ms, then the release channel of each name (n).
// For every name of ours whose line has a live waiter, the key is not
// deleted but reserved for the head of the line for the claim window, and
// the head is announced on the name's channel so it tries at once instead
// of sleeping out its retry delay. While the key is reserved, a newcomer's
// plain SET NX (the uncontended acquisition, fast_acquire.hpp) fails, so it
// cannot overtake the line; a head that does not come within the claim
// window lets the reservation expire.
// The release's common case first: one name, ours, nobody waiting. It
// skips the closures below, which cost each node about 1.5 µs per call
// (measured warm with redis-cli --pipe: 3.4 against 2.0 µs per EVALSHA).
constexpr std::string_view release_head = R"lua(
if #KEYS == 3 and redis.call('GET', KEYS[1]) == ARGV[1] and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
local n = #KEYS / 3
local function line(i) return KEYS[n + i] end
local function leases(i) return KEYS[2 * n + i] end
)lua";

// The same KEYS for leaving the line, without the release's shortcut (a
// waiter that leaves must never delete a name).
constexpr std::string_view leave_head = R"lua(
local n = #KEYS / 3
local function line(i) return KEYS[n + i] end
local function leases(i) return KEYS[2 * n + i] end
)lua";
constexpr std::string_view release_body = R"lua(
local reserved_for_us = reserved_prefix .. ARGV[1]
local mine, foreign = 0, 0
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v == ARGV[1] then
    mine = mine + 1
    pass_on(i, ARGV[2 + i], ARGV[2])
  elseif v == reserved_for_us then
    -- A release reserved it for us while we were still in line, and we got
    -- the lock elsewhere: not ours to report, but ours to pass on.
    pass_on(i, ARGV[2 + i], ARGV[2])
  elseif v and string.sub(v, 1, #reserved_prefix) ~= reserved_prefix then
    foreign = foreign + 1
  end
end
if foreign > 0 then
  return -1
end
if mine > 0 then
  return 1
end
return 0
)lua";

// SET NX on every name and the node's fencing counter in one atomic step.
// KEYS = names (n), the node record, waiting lines (n), leases (n).
// ARGV = value, expiry ms, arrival (score), lease ms, "1" to wait in line,
// claim window ms.
// The lock goes to a caller that is at the head of every name's line (the
// oldest waiter whose lease has not run out), or to anyone on names where
// nobody waits. Every node orders a line by the same client-given arrival,
// so nodes agree on the head and two waiters do not split the votes. A
// waiter refreshes its lease on every attempt; one that vanished drops out
// when its lease runs out. A head that leaves the lock free for longer than
// the claim window (it crashed, or cannot reach the nodes) loses its place,
// so a free lock is not held up for a whole lease.
// Where we won: {token, the record's identity, ms since it was first seen
// unverified for that identity (-1: never), the longest expiry any client
// used here (raised to ours if ours is longer)}; the client decides from
// these whether the node's vote counts (see node_trust.hpp). Else -2 (busy; caller is first in
// every line), -1 (busy; others are ahead), or nil (busy; not waiting).
constexpr std::string_view acquire_head = R"lua(
local n = (#KEYS - 1) / 3
local function line(i) return KEYS[n + 1 + i] end
local function leases(i) return KEYS[2 * n + 1 + i] end
)lua";
constexpr std::string_view acquire_body = R"lua(
local record = KEYS[n + 1]
local value = ARGV[1]
local free, queued, blocked = true, {}, {}
for i = 1, n do
  if redis.call('EXISTS', line(i)) == 1 then
    queued[i] = true
    local head = live_head(i)
    if head and head ~= value then
      free = false
      blocked[#blocked + 1] = i
    end
  end
end
if not free then
  -- Held by a holder; a reservation is no holder, and the claim window of
  -- the head it was made for runs from the release (pass_on's stamp).
  local held = false
  for i = 1, n do
    local v = redis.call('GET', KEYS[i])
    if v and string.byte(v, 1) ~= 0 then
      held = true
      break
    end
  end
  if not held then
    -- The lock is free, yet a head has not taken it. Since when ("\0free"
    -- in the leases) tells a head on its way from one that is gone.
    free = true
    for _, i in ipairs(blocked) do
      local since = redis.call('HGET', leases(i), '\0free')
      if not since then
        redis.call('HSET', leases(i), '\0free', clock())
        free = false
      elseif clock() - tonumber(since) < tonumber(ARGV[6]) then
        free = false
      else
        local head = live_head(i)
        redis.call('ZREM', line(i), head)
        redis.call('HDEL', leases(i), head)
        redis.call('HSET', leases(i), '\0free', clock())
        local next_head = live_head(i)
        if next_head and next_head ~= value then
          free = false
        end
      end
    end
  end
end
-- Name i is open to us when it is free, reserved for us (we are the head a
-- release found), or reserved for a waiter no longer in its line (gone,
-- or passed over after its claim window). A holder's value, or a
-- reservation for a waiter still in line, means busy.
local mine_reserved = reserved_prefix .. value
local function open_to_us(i)
  local v = redis.call('GET', KEYS[i])
  if not v or v == mine_reserved then
    return true
  end
  if string.sub(v, 1, #reserved_prefix) ~= reserved_prefix then
    return false
  end
  return not redis.call('ZSCORE', line(i), string.sub(v, #reserved_prefix + 1))
end
if free and n == 1 then
  if not redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2]) then
    free = open_to_us(1)
    if free then
      redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
    end
  end
elseif free then
  for i = 1, n do
    if not open_to_us(i) then
      free = false
      break
    end
  end
  if free then
    for i = 1, n do
      redis.call('SET', KEYS[i], value, 'PX', ARGV[2])
    end
  end
end
if free then
  for i = 1, n do
    if queued[i] then
      redis.call('ZREM', line(i), value)
      redis.call('HDEL', leases(i), value, '\0free', '\0reserved')
    end
  end
  local token = redis.call('HINCRBY', record, 'fence', 1)
  local stamp = redis.call('HMGET', record, 'run', 'since', 'window')
  local age = -1
  if stamp[2] then
    age = clock() - tonumber(stamp[2])
  end
  local window = tonumber(stamp[3] or '0')
  if window < tonumber(ARGV[2]) then
    window = tonumber(ARGV[2])
    redis.call('HSET', record, 'window', window)
  end
  return {token, stamp[1] or '', age, window}
end
if ARGV[5] ~= '1' then
  return false
end
local lease = tonumber(ARGV[4])
local first_everywhere = true
for i = 1, n do
  redis.call('ZADD', line(i), 'NX', ARGV[3], value)
  redis.call('HSET', leases(i), value, clock() + lease)
  redis.call('PEXPIRE', line(i), 2 * lease)
  redis.call('PEXPIRE', leases(i), 2 * lease)
  if redis.call('ZRANGE', line(i), 0, 0)[1] ~= value then
    first_everywhere = false
  end
end
if first_everywhere then
  return -2
end
return -1
)lua";

// A waiter that gives up (or got the lock elsewhere) leaves the lines, and
// passes on any name a release reserved for it meanwhile.
// KEYS and ARGV as release_body's.
constexpr std::string_view leave_body = R"lua(
local reserved_for_us = reserved_prefix .. ARGV[1]
for i = 1, n do
  redis.call('ZREM', line(i), ARGV[1])
  redis.call('HDEL', leases(i), ARGV[1])
  if redis.call('GET', KEYS[i]) == reserved_for_us then
    pass_on(i, ARGV[2 + i], ARGV[2])
  end
end
return 1
)lua";

// A script made of a head (which defines `n`, `line(i)` and `leases(i)`),
// the line prelude and a body, joined and hashed once.
template <const std::string_view& Head, const std::string_view& Body>
const lua_script& line_script() {
  static const std::string source = [] {
    std::string s(Head);
    s += line_prelude;
    s += Body;
    return s;
  }();
  static const lua_script s{source, sha1_hex(source)};
  return s;
}

}  // namespace

const lua_script& acquire_script() {
  return line_script<acquire_head, acquire_body>();
}

const lua_script& leave_script() {
  return line_script<leave_head, leave_body>();
}

std::string line_key(std::string_view name) {
  return std::string(name) + ":redsync-line";
}
std::string lease_key(std::string_view name) {
  return std::string(name) + ":redsync-leases";
}
std::string reserved_value(std::string_view head) {
  std::string v(reserved_value_prefix, sizeof reserved_value_prefix - 1);
  v += head;
  return v;
}
std::string release_channel(std::string_view name) {
  return "redsync:release:" + std::string(name);
}

const lua_script& release_script() {
  return line_script<release_head, release_body>();
}

}  // namespace redsync::detail
