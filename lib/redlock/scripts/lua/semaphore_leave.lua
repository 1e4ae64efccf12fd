-- A waiter leaves the permits' line (it gave up, or holds its permit and
-- was still in line on this node): the waiter its place lets in is woken.
-- Sent after kind_mark.lua, semaphore_prelude.lua, semaphore_line.lua and
-- semaphore_wake.lua; the cluster variant publishes with SPUBLISH.

local line, leases = KEYS[4], KEYS[5]
local removed = redis.call('ZREM', line, ARGV[1])
if removed == 1 then
  redis.call('HDEL', leases, ARGV[1])
  local free = tonumber(ARGV[3]) - #redis.call('ZRANGE', KEYS[1], 0, -1)
  wake_entering(line, leases, free, ARGV[2], '')
end
return removed
