-- Wake-ups of the permits' waiters, each on its own channel (the channel,
-- ':', the SHA1 of its value). A waiter that nobody hears there (the
-- publish reached no subscriber: it crashed, or has not subscribed yet) is
-- taken out of the line: a dead waiter must not hold free permits until
-- its lease runs out, and a live one rejoins at its arrival with its next
-- attempt. Sent after semaphore_line.lua. The cluster variants publish
-- with SPUBLISH (embed_lua.py: cluster_publish).

-- Tells waiter w; false (and w out of the line) if nobody heard it.
local function notify(line, leases, w, channel, payload)
  if redis.call('PUBLISH', channel .. ':' .. redis.sha1hex(w), payload) > 0 then
    return true
  end
  drop_waiter(line, leases, w)
  return false
end
-- Wakes the waiter that a freed permit lets in: with `free` permits free on
-- this node, the live waiter of rank `free` in the line (those before it
-- could already take one), or the next one that hears it.
local function wake_entering(line, leases, free, channel, payload)
  if free <= 0 or redis.call('EXISTS', line) == 0 then
    return
  end
  local rank = 0
  scan_line(line, function(w)
    if not waiter_live(line, leases, w) then
      return false, true
    end
    if rank + 1 < free then
      rank = rank + 1
      return false, false
    end
    if notify(line, leases, w, channel, payload) then
      return true, false
    end
    return false, true
  end)
end
