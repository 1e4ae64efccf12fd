-- What every semaphore script but the fencing write-back starts with: the
-- server clock (read before any write), the removal of expired permits, and
-- keep_until_last(), which sets the TTL of both keys to the latest permit's
-- expiry (or deletes both when none is left). semaphore_scripts.hpp has the
-- keys, the invariants and each script's KEYS, ARGV and answers.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local function keep_until_last()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if not last[2] then
    redis.call('DEL', KEYS[1], KEYS[2])
    return
  end
  local ttl = tonumber(last[2]) - now
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
