-- What every semaphore script but the fencing write-back starts with (after
-- kind_mark.lua): the server clock (read before any write), the removal of
-- expired permits, and keep_until_last(), which makes both keys, and the
-- kind mark in the name's lock key (KEYS[3]), expire with the latest permit
-- (or deletes them all when none is left), writing the mark back where it
-- is missing. The lock key is otherwise touched only while it holds the
-- mark: it may hold a Mutex's value only where a client without the mark
-- granted permits (an older version).
-- semaphore_scripts.hpp has the keys, the invariants and each script's
-- KEYS, ARGV and answers.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local function keep_until_last()
  -- pcall: a key of another type there (not ours) must not stop a release.
  local held = redis.pcall('GET', KEYS[3])
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if not last[2] then
    redis.call('DEL', KEYS[1], KEYS[2])
    if held == semaphore_mark then
      redis.call('DEL', KEYS[3])
    end
    return
  end
  -- A TTL, not an instant: PEXPIREAT is not among the commands the
  -- documented ACL grants. A server that counts it from the live clock
  -- (7.0) expires the keys a script's run time after the last permit,
  -- never before it.
  local ttl = tonumber(last[2]) - now
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  if held == false then
    -- The mark went while permits live (deleted by hand, or by a client
    -- without it): put it back. The key is empty, so no mutex holds the
    -- name here. pcall: a node over its maxmemory may refuse the SET, and
    -- that must not stop a release or an extension.
    if redis.pcall('SET', KEYS[3], semaphore_mark)['ok'] then
      held = semaphore_mark
    end
  end
  if held == semaphore_mark then
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
end
