-- What an RWMutex's readers keep in the name's lock key (the key its writer
-- SETs) while any reader holds the name on this node: a value no client can
-- use (it starts with a NUL byte, as a reservation and the semaphore's mark
-- do), expiring with the latest reader. A writer's SET NX fails on it as on
-- any holder's value, so the writer waits in line until the last reader
-- lets go or expires (docs/api.md, "Read-write locks"). A reader's value
-- (its entry in the line and in the readers' set) starts with the byte 1,
-- which no writer's value may (options_check.cpp).

local readers_mark = '\0redsync:readers\0'
local function is_reader(v)
  return string.byte(v, 1) == 1
end
-- The readers' set (scored by expiry, server ms) without the expired, and
-- the mark and the set kept until the latest reader's expiry; both go when
-- no reader is left (true then).
local function keep_until_last_reader(name, readers, now)
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')[2]
  if not last then
    redis.call('DEL', name, readers)
    return true
  end
  local ttl = tonumber(last) - now
  redis.call('SET', name, readers_mark, 'PX', ttl)
  redis.call('PEXPIRE', readers, ttl)
  return false
end
