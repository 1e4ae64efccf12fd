-- The semaphore's release, and the undo of a failed attempt, sent after
-- kind_mark.lua, semaphore_prelude.lua, semaphore_line.lua and
-- semaphore_wake.lua. The cluster variant publishes with SPUBLISH
-- (embed_lua.py: cluster_publish).

local removed = redis.call('ZREM', KEYS[1], ARGV[1])
keep_until_last()
if ARGV[4] ~= '' then
  -- The undo of an attempt whose waiter stays in line: back at its arrival.
  -- The grant had taken it out of the line and taken a permit; both are
  -- back, so the waiters a permit is free for are those of before the
  -- grant, and nobody is woken.
  join_line(KEYS[4], KEYS[5], ARGV[4], ARGV[5], tonumber(ARGV[6]))
elseif removed == 1 then
  local free = tonumber(ARGV[3]) - #redis.call('ZRANGE', KEYS[1], 0, -1)
  wake_entering(KEYS[4], KEYS[5], free, ARGV[2], string.match(ARGV[1], '^(%d+):'))
end
return removed
