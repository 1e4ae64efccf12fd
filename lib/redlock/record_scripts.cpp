// The Lua sources of the node record's scripts: the fencing write-back and
// the repair's read and stamp (node_trust.hpp).

#include "redlock/script_cache.hpp"
#include "redlock/scripts.hpp"

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
