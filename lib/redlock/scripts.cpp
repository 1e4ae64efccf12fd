// The Lua sources of the scripts, each script's SHA1 (computed once), and
// the keys and channel derived from a lock name.

#include "redlock/scripts.hpp"

#include "util/sha1.hpp"

namespace redsync::detail {

namespace {

// Every lock script takes the lock's names as KEYS (one for a plain lock,
// several for a multi-name lock, always in sorted order) and is
// all-or-nothing on a node. Per-name keys follow the names in the same order.

// Compare-and-delete: only our value is ever deleted. The three-way answer
// lets unlock tell "expired" (0) from "taken" (-1).
// KEYS = names (n), their waiting lines (n); ARGV = value, then the release
// channel of each name (n). For every name we deleted whose line has a
// waiter, the head of that line is announced on that name's channel so it
// can try at once instead of sleeping out its retry delay.
constexpr std::string_view release_source = R"lua(
local n = #KEYS / 2
local mine, foreign = {}, 0
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v == ARGV[1] then
    mine[#mine + 1] = i
  elseif v then
    foreign = foreign + 1
  end
end
for _, i in ipairs(mine) do
  redis.call('DEL', KEYS[i])
  local next_in_line = redis.call('ZRANGE', KEYS[n + i], 0, 0)[1]
  if next_in_line then
    redis.call('PUBLISH', ARGV[1 + i], next_in_line)
  end
end
if foreign > 0 then
  return -1
end
if #mine > 0 then
  return 1
end
return 0
)lua";

// Compare-and-PEXPIRE, optionally re-creating missing keys (never
// overwriting another holder's value).
constexpr std::string_view extend_source = R"lua(
local values, missing = {}, 0
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v == false then
    missing = missing + 1
  elseif v ~= ARGV[1] then
    return -1
  end
  values[i] = v
end
if missing > 0 and ARGV[3] ~= '1' then
  return 0
end
for i = 1, #KEYS do
  if values[i] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  else
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
end
return 1
)lua";

// Read-only ownership check, three-way like the others.
constexpr std::string_view check_source = R"lua(
local missing = 0
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v == false then
    missing = missing + 1
  elseif v ~= ARGV[1] then
    return -1
  end
end
if missing > 0 then
  return 0
end
return 1
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
constexpr std::string_view acquire_source = R"lua(
local n = (#KEYS - 1) / 3
local record = KEYS[n + 1]
local value = ARGV[1]
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
  local line, leases = KEYS[n + 1 + i], KEYS[2 * n + 1 + i]
  while true do
    local first = redis.call('ZRANGE', line, 0, 0)[1]
    if not first then
      return nil
    end
    if tonumber(redis.call('HGET', leases, first) or '0') >= clock() then
      return first
    end
    redis.call('ZREM', line, first)
    redis.call('HDEL', leases, first)
  end
end
local free, queued, blocked = true, {}, {}
for i = 1, n do
  if redis.call('EXISTS', KEYS[n + 1 + i]) == 1 then
    queued[i] = true
    local head = live_head(i)
    if head and head ~= value then
      free = false
      blocked[#blocked + 1] = i
    end
  end
end
if not free then
  local held = false
  for i = 1, n do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      held = true
      break
    end
  end
  if not held then
    -- The lock is free, yet a head has not taken it. Since when ("\0free"
    -- in the leases) tells a head on its way from one that is gone.
    free = true
    for _, i in ipairs(blocked) do
      local leases = KEYS[2 * n + 1 + i]
      local since = redis.call('HGET', leases, '\0free')
      if not since then
        redis.call('HSET', leases, '\0free', clock())
        free = false
      elseif clock() - tonumber(since) < tonumber(ARGV[6]) then
        free = false
      else
        local head = live_head(i)
        redis.call('ZREM', KEYS[n + 1 + i], head)
        redis.call('HDEL', leases, head)
        redis.call('HSET', leases, '\0free', clock())
        local next_head = live_head(i)
        if next_head and next_head ~= value then
          free = false
        end
      end
    end
  end
end
if free then
  if n == 1 then
    free = redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2])
  else
    for i = 1, n do
      if redis.call('EXISTS', KEYS[i]) == 1 then
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
end
if free then
  for i = 1, n do
    if queued[i] then
      redis.call('ZREM', KEYS[n + 1 + i], value)
      redis.call('HDEL', KEYS[2 * n + 1 + i], value, '\0free')
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
  local line, leases = KEYS[n + 1 + i], KEYS[2 * n + 1 + i]
  redis.call('ZADD', line, 'NX', ARGV[3], value)
  redis.call('HSET', leases, value, clock() + lease)
  redis.call('PEXPIRE', line, 2 * lease)
  redis.call('PEXPIRE', leases, 2 * lease)
  if redis.call('ZRANGE', line, 0, 0)[1] ~= value then
    first_everywhere = false
  end
end
if first_everywhere then
  return -2
end
return -1
)lua";

// A waiter that gives up leaves the lines. KEYS = lines (n), leases (n);
// ARGV = value.
constexpr std::string_view leave_source = R"lua(
local n = #KEYS / 2
for i = 1, n do
  redis.call('ZREM', KEYS[i], ARGV[1])
  redis.call('HDEL', KEYS[n + i], ARGV[1])
end
return 1
)lua";

// Fencing write-back. KEYS = first name, node record; ARGV = value, token.
constexpr std::string_view fence_source = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local c = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0')
  if c < tonumber(ARGV[2]) then
    redis.call('HSET', KEYS[2], 'fence', ARGV[2])
  end
  return 1
end
return 0
)lua";

// Reads the node record for the repair: {fence, identity, since, server now
// ms, mark, window}, missing fields as ''. The mark (the record's `pending`
// field) is set to ARGV[1] if the record has none and ARGV[1] is not empty.
// Any mark will do for the repair: what matters is that a flush wipes it.
constexpr std::string_view record_read_source = R"lua(
local r = redis.call('HMGET', KEYS[1], 'fence', 'run', 'since', 'pending', 'window')
local mark = r[4]
if not mark and ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], 'pending', ARGV[1])
  mark = ARGV[1]
end
local t = redis.call('TIME')
local now = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return {r[1] or '', r[2] or '', r[3] or '', now, mark or '', r[5] or ''}
)lua";

// Repairs a node record. KEYS = node record; ARGV = counter floor, identity,
// mark, since (server ms), window ms. Only if the record still carries the
// mark read earlier (so it was not flushed since): raises the counter to at
// least the floor and the window to at least ARGV's and, unless already
// stamped for this identity, stamps it (identity, since). Returns 1 if
// applied, 0 if the mark was gone.
constexpr std::string_view record_stamp_source = R"lua(
local cur = redis.call('HMGET', KEYS[1], 'fence', 'run', 'pending', 'window')
if cur[3] ~= ARGV[3] then
  return 0
end
if tonumber(cur[1] or '0') < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1])
end
if tonumber(cur[4] or '0') < tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'window', ARGV[5])
end
if cur[2] ~= ARGV[2] then
  redis.call('HSET', KEYS[1], 'run', ARGV[2], 'since', ARGV[4])
end
return 1
)lua";

// A script with its SHA1, computed once per script.
template <const std::string_view& Source>
const lua_script& cached_script() {
  static const lua_script s{Source, sha1_hex(Source)};
  return s;
}

}  // namespace

const lua_script& acquire_script() {
  return cached_script<acquire_source>();
}

const lua_script& leave_script() {
  return cached_script<leave_source>();
}

std::string line_key(std::string_view name) {
  return std::string(name) + ":redsync-line";
}
std::string lease_key(std::string_view name) {
  return std::string(name) + ":redsync-leases";
}
std::string release_channel(std::string_view name) {
  return "redsync:release:" + std::string(name);
}

const lua_script& fence_script() {
  return cached_script<fence_source>();
}

const lua_script& record_read_script() {
  return cached_script<record_read_source>();
}

const lua_script& record_stamp_script() {
  return cached_script<record_stamp_source>();
}

const lua_script& check_script() {
  return cached_script<check_source>();
}

const lua_script& release_script() {
  return cached_script<release_source>();
}

const lua_script& extend_script() {
  return cached_script<extend_source>();
}

}  // namespace redsync::detail
