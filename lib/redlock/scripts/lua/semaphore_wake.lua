-- Wakes the waiter that a freed permit lets in: with `free` permits free on
-- this node, the live waiter of rank `free` in the line (those before it
-- could already take one), told on its own channel (the channel, ':', the
-- SHA1 of its value) with `payload`. Sent after semaphore_line.lua. The
-- cluster variants publish with SPUBLISH (embed_lua.py: cluster_publish).

local function wake_entering(line, leases, free, channel, payload)
  if free <= 0 or redis.call('EXISTS', line) == 0 then
    return
  end
  local rank = 0
  for _, w in ipairs(redis.call('ZRANGE', line, 0, -1)) do
    if waiter_live(line, leases, w) then
      rank = rank + 1
      if rank == free then
        redis.call('PUBLISH', channel .. ':' .. redis.sha1hex(w), payload)
        return
      end
    end
  end
end
