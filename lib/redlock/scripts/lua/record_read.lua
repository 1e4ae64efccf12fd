-- Reads the node record for the repair (node_trust.hpp). KEYS = record;
-- ARGV = a random value, the server identity the client's connection read
-- ('' if unknown). Returns {fence, identity, since, server now ms, mark,
-- window}, missing fields as ''. Where the record is not verified for ARGV's
-- identity and its mark (the `pending` field, "<server ms> <random>
-- <identity>") is missing, names another identity or is dated in the
-- server's future (its clock moved back), the mark is set to one for now and
-- that identity: step (1). Where the record is verified for it and `since`
-- is in the server's future, `since` is moved to now, which restarts the
-- restart guard's window. TIME is read before any write.

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
