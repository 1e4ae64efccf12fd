// The Lua sources of the lock scripts that read or write a waiting line
// (acquire, release, leave), each script's SHA1 (computed once), and the
// keys and channel derived from a lock name. The holder's extend and check
// are in holder_scripts.cpp, the node record's scripts in
// record_scripts.cpp.

#include "redlock/scripts/scripts.hpp"

#include "redlock/scripts/script_cache.hpp"
#include "redlock/scripts/server_mark.hpp"
#include "util/sha1.hpp"

#include <stdexcept>

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
constexpr std::string_view line_prelude_head = R"lua(
local reserved_prefix = '\0redsync:next\0'
local now = nil
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
local function is_reservation(v)
  return v and string.sub(v, 1, #reserved_prefix) == reserved_prefix
end
-- The oldest waiter of line i whose lease has not run out (expired ones go:
-- a waiter whose lease ran out is gone, and loses its place).
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
-- Refreshes the caller's lease in line i, and keeps the line (and so a
-- reservation made from it) alive at least as long as that lease.
local function keep_place(i, lease)
  redis.call('HSET', leases(i), ARGV[1], clock() + lease)
  if redis.call('PTTL', line(i)) < lease then
    redis.call('PEXPIRE', line(i), lease)
  end
  if redis.call('PTTL', leases(i)) < lease then
    redis.call('PEXPIRE', leases(i), lease)
  end
end
-- Reserves name i for waiter h for as long as the line lives (the line's
-- TTL is at least every live waiter's lease), and tells h, on h's own
-- channel (waiter_channel: only h wakes), unless it is `quiet` (the caller
-- itself). A node over its maxmemory refuses the SET
-- (eval mode): the name is let go instead.
local function reserve(i, h, channel, quiet)
  local ttl = redis.call('PTTL', line(i))
  if ttl < 1 then
    ttl = 1
  end
  if redis.pcall('SET', KEYS[i], reserved_prefix .. h, 'PX', ttl).err then
    redis.call('DEL', KEYS[i])
  elseif h ~= quiet then
    redis.call(')lua";
// reserve()'s publish command (standalone_publish or cluster_publish,
// scripts.hpp) goes here: only this word differs between the two variants of
// a script.
constexpr std::string_view line_prelude_tail = R"lua(', channel .. ':' .. redis.sha1hex(h), h)
  end
end
-- Restores rule R (scripts.hpp) on name i: a name no holder holds is
-- reserved for the live head of its line, or free when nobody waits.
local function settle(i, channel, quiet)
  local v = redis.call('GET', KEYS[i])
  if v and not is_reservation(v) then
    return
  end
  local h = nil
  if redis.call('EXISTS', line(i)) == 1 then
    h = live_head(i)
  end
  if not h then
    if v then
      redis.call('DEL', KEYS[i])
    end
  elseif v ~= reserved_prefix .. h then
    reserve(i, h, channel, quiet)
  end
end
)lua";

// The release's common case first: one name, ours, nobody waiting. It
// skips the closures below, which cost each node about 1.5 µs per call
// (measured warm with redis-cli --pipe: 3.4 against 2.0 µs per EVALSHA).
// An undo (ARGV[2] = "1") never takes it: a caller that undoes an attempt
// may be in the line.
constexpr std::string_view release_head = R"lua(
if #KEYS == 3 and ARGV[2] == '0' and redis.call('GET', KEYS[1]) == ARGV[1] and
   redis.call('EXISTS', KEYS[2]) == 0 then
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

// Release (ARGV[2] = "0"): the holder leaves every line it may still be in,
// then lets go of each name holding its value, or reserved for it. Undo
// (ARGV[2] = "1", a failed attempt): the caller keeps its place, and each
// name holding its value goes back to what rule R makes of it: reserved for
// the live head (the caller itself, if it is the head) or free.
constexpr std::string_view release_body = R"lua(
local value = ARGV[1]
local undo = ARGV[2] == '1'
local reserved_for_us = reserved_prefix .. value
local mine, foreign = 0, 0
for i = 1, n do
  if not undo then
    redis.call('ZREM', line(i), value)
    redis.call('HDEL', leases(i), value)
  end
  local v = redis.call('GET', KEYS[i])
  if v == value then
    mine = mine + 1
    redis.call('DEL', KEYS[i])
    settle(i, ARGV[2 + i], value)
  elseif v == reserved_for_us then
    if not undo then
      settle(i, ARGV[2 + i], value)
    end
  elseif v and not is_reservation(v) then
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

// The acquisition: SET on every name and the node's fencing counter in one
// atomic step, and the caller's place in the lines. See scripts.hpp for
// KEYS, ARGV, the answers and the line's rules.
// A cluster member's form has the server mark's key as its last KEY
// (server_mark.hpp).
constexpr std::string_view acquire_head = R"lua(
local n = (#KEYS - 1) / 3
local function line(i) return KEYS[n + 1 + i] end
local function leases(i) return KEYS[2 * n + 1 + i] end
)lua";
constexpr std::string_view acquire_cluster_head = R"lua(
local n = (#KEYS - 2) / 3
local function line(i) return KEYS[n + 1 + i] end
local function leases(i) return KEYS[2 * n + 1 + i] end
)lua";
constexpr std::string_view acquire_body = R"lua(
local record = KEYS[n + 1]
local value = ARGV[1]
local mode = ARGV[5]
-- Rule A first: where our arrival moved back (we were evicted on some
-- node), our old rank here must not make us the head.
if mode ~= '0' then
  for i = 1, n do
    local score = redis.call('ZSCORE', line(i), value)
    if score and tonumber(score) < tonumber(ARGV[3]) then
      redis.call('ZADD', line(i), ARGV[3], value)
    end
  end
end
-- Rule H: only the live head of every line the names have (or anyone, on
-- names nobody waits for) may take them.
local head_everywhere = true
local in_line = 0
for i = 1, n do
  if redis.call('EXISTS', line(i)) == 1 then
    local h = live_head(i)
    if h == value then
      in_line = 1
    elseif h then
      head_everywhere = false
    end
  end
end
-- A name is open to us when it is free or reserved (for anyone: rule H
-- already made us the one it is reserved for, in effect).
local won = false
if head_everywhere then
  if n == 1 then
    won = redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2])
    if not won and is_reservation(redis.call('GET', KEYS[1])) then
      won = redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
    end
  else
    won = true
    for i = 1, n do
      local v = redis.call('GET', KEYS[i])
      if v and not is_reservation(v) then
        won = false
        break
      end
    end
    if won then
      for i = 1, n do
        redis.call('SET', KEYS[i], value, 'PX', ARGV[2])
      end
    end
  end
end
if won then
  -- We stay in the lines until the acquisition is confirmed (rule L): if
  -- it fails on the other nodes, the undo gives these names back to us.
  if in_line == 1 then
    for i = 1, n do
      if redis.call('ZSCORE', line(i), value) then
        keep_place(i, tonumber(ARGV[4]))
      end
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
  return {token, stamp[1] or '', age, window, in_line}
end
if mode == '0' then
  for i = 1, n do
    settle(i, ARGV[6 + i], nil)
  end
  return false
end
-- Join, or stay in, every line (rule A).
local lease = tonumber(ARGV[4])
local evicted = false
for i = 1, n do
  local score = redis.call('ZSCORE', line(i), value)
  if score and tonumber(redis.call('HGET', leases(i), value) or '0') < clock() then
    -- Still listed behind a live head, but our lease ran out: we were gone
    -- (live_head only drops the expired at the front). Same as evicted.
    evicted = true
    redis.call('ZADD', line(i), ARGV[6], value)
  elseif not score and mode == '2' then
    -- We were in this line and are not any more: our lease ran out (or the
    -- node lost the line). Back of the line, at this attempt's time.
    evicted = true
    redis.call('ZADD', line(i), ARGV[6], value)
  elseif not score then
    redis.call('ZADD', line(i), ARGV[3], value)
  end
  keep_place(i, lease)
end
local first = true
for i = 1, n do
  if live_head(i) ~= value then
    first = false
  end
  settle(i, ARGV[6 + i], value)
end
local answer = -1
if first then
  answer = -2
end
if evicted then
  answer = answer - 2
end
return answer
)lua";

// A waiter that gives up, or whose acquisition was confirmed, leaves the
// lines; a name reserved for it (or for another waiter no longer at the
// head) goes to the live head, or is freed. A name holding its value is
// left alone: it is the confirmed holder's.
// KEYS and ARGV as release_body's.
constexpr std::string_view leave_body = R"lua(
for i = 1, n do
  redis.call('ZREM', line(i), ARGV[1])
  redis.call('HDEL', leases(i), ARGV[1])
  settle(i, ARGV[2 + i], nil)
end
return 1
)lua";

// A script made of a head (which defines `n`, `line(i)` and `leases(i)`),
// the line prelude with `Publish` as its publish command, and a body, joined
// and hashed once.
template <const std::string_view& Head, const std::string_view& Body, const std::string_view& Publish>
const lua_script& line_variant(const lua_script* cluster) {
  static const std::string source = [] {
    std::string s(Head);
    s += line_prelude_head;
    s += Publish;
    s += line_prelude_tail;
    s += Body;
    return s;
  }();
  static const lua_script s{source, sha1_hex(source), cluster};
  return s;
}

// The standalone script (the bytes every release has used: same SHA1),
// which names its cluster variant (SPUBLISH), generated from the same text.
template <const std::string_view& Head, const std::string_view& Body>
const lua_script& line_script() {
  return line_variant<Head, Body, standalone_publish>(&line_variant<Head, Body, cluster_publish>(nullptr));
}

}  // namespace

const lua_script& acquire_script() {
  // The standalone form: the bytes (and SHA1) every standalone member has
  // run. The cluster form publishes with SPUBLISH, takes the server mark's
  // key last and appends the mark to its yes (server_mark.hpp).
  static const std::string plain_source = [] {
    std::string s(acquire_head);
    s += line_prelude_head;
    s += standalone_publish;
    s += line_prelude_tail;
    s += acquire_body;
    return s;
  }();
  static const std::string cluster_source = [] {
    std::string body(acquire_body);
    const std::string_view yes = "return {token, stamp[1] or '', age, window, in_line}";
    const auto at = body.find(yes);
    if (at == std::string::npos) throw std::logic_error("acquire script: its yes not found");
    body.replace(at, yes.size(), "return vote({token, stamp[1] or '', age, window, in_line})");
    std::string s(acquire_cluster_head);
    s += line_prelude_head;
    s += cluster_publish;
    s += line_prelude_tail;
    s += mark_vote;
    s += body;
    return s;
  }();
  static const lua_script cluster{cluster_source, sha1_hex(cluster_source), nullptr};
  static const lua_script plain{plain_source, sha1_hex(plain_source), &cluster};
  return plain;
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
