-- What every semaphore script but the fencing write-back starts with (after
-- kind_mark.lua): the server clock (read before any write), the removal of
-- expired permits, and keep_until_last(), which sets the TTL of both keys,
-- and of the kind mark in the name's lock key (KEYS[3]), to the latest
-- permit's expiry (or deletes them all when none is left). The lock key is
-- touched only while it holds the mark: it may hold a Mutex's value only
-- where a client without the mark granted permits (an older version).
-- semaphore_scripts.hpp has the keys, the invariants and each script's
-- KEYS, ARGV and answers.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local function keep_until_last()
  -- pcall: a key of another type there (not ours) must not stop a release.
  local marked = redis.pcall('GET', KEYS[3]) == semaphore_mark
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if not last[2] then
    redis.call('DEL', KEYS[1], KEYS[2])
    if marked then
      redis.call('DEL', KEYS[3])
    end
    return
  end
  local ttl = tonumber(last[2]) - now
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  if marked then
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
end
