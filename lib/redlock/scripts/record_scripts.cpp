// The Lua sources of the node record's scripts: the fencing write-back and
// the repair's read and stamp (node_trust.hpp).

#include "redlock/scripts/script_cache.hpp"
#include "redlock/scripts/scripts.hpp"

namespace redsync::detail {

namespace {

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

// Reads the node record for the repair (node_trust.hpp). KEYS = record;
// ARGV = a random value, the server identity the client's connection read
// ('' if unknown). Returns {fence, identity, since, server now ms, mark,
// window}, missing fields as ''. Where the record is not verified for ARGV's
// identity and its mark (the `pending` field, "<server ms> <random>
// <identity>") is missing, names another identity or is dated in the
// server's future (its clock moved back), the mark is set to one for now and
// that identity: step (1). Where the record is verified for it and `since`
// is in the server's future, `since` is moved to now, which restarts the
// restart guard's window. TIME is read before any write.
constexpr std::string_view record_read_source = R"lua(
local r = redis.call('HMGET', KEYS[1], 'fence', 'run', 'since', 'pending', 'window')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mark = r[4]
if ARGV[2] ~= '' and r[2] ~= ARGV[2] then
  local at, run = nil, nil
  if mark then
    at, run = string.match(mark, '^(%d+) %S+ (.+)$')
  end
  if not at or run ~= ARGV[2] or tonumber(at) > now then
    mark = string.format('%d %s %s', now, ARGV[1], ARGV[2])
    redis.call('HSET', KEYS[1], 'pending', mark)
  end
elseif ARGV[2] ~= '' and r[3] and tonumber(r[3]) and tonumber(r[3]) > now then
  redis.call('HSET', KEYS[1], 'since', string.format('%d', now))
  r[3] = string.format('%d', now)
end
return {r[1] or '', r[2] or '', r[3] or '', string.format('%d', now), mark or '', r[5] or ''}
)lua";

// Repairs a node record: step (3). KEYS = node record; ARGV = counter floor,
// identity, mark, since (server ms), window ms. Only if the record still
// carries the mark read earlier (so it was not flushed, or marked anew,
// since): raises the counter to at least the floor and the window to at
// least ARGV's, stamps it (identity, since) unless already stamped for this
// identity, and removes the mark. Returns 1 if applied, 0 if the mark was
// gone.
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
redis.call('HDEL', KEYS[1], 'pending')
return 1
)lua";

}  // namespace

const lua_script& fence_script() {
  return cached_script<fence_source>();
}

const lua_script& record_read_script() {
  return cached_script<record_read_source>();
}

const lua_script& record_stamp_script() {
  return cached_script<record_stamp_source>();
}

}  // namespace redsync::detail
