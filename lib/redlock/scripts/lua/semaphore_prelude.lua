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
  -- The last permit's own instant (server ms), not a TTL from `now`: the
  -- keys then go exactly when it does, however long the script ran.
  local at = last[2]
  redis.call('PEXPIREAT', KEYS[1], at)
  redis.call('PEXPIREAT', KEYS[2], at)
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
    redis.call('PEXPIREAT', KEYS[3], at)
  end
end
