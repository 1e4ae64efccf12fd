-- The pieces every mutex script that reads a waiting line shares (acquire,
-- release, leave): the server clock (read at most once, before any write),
-- the live head of a line, a waiter's lease, and rule R (scripts.hpp).
-- The script's head defines `n`, `line(i)` and `leases(i)` first, and has
-- the names as its first KEYS.
-- A key holding `reserved_prefix .. value` is reserved for the waiter with
-- that value (see release.lua): it is nobody's lock, and only that waiter's
-- acquisition may take it.
-- A wake-up is published with PUBLISH on a standalone node; the cluster
-- variant of every script that includes this piece uses SPUBLISH instead
-- (embed_lua.py: cluster_publish), the only word that differs.

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
    redis.call('PUBLISH', channel .. ':' .. redis.sha1hex(h), h)
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
