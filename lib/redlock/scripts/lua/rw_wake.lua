-- Wakes the live readers queued in line i up to its first live writer (they
-- share the name with the readers that hold it), each on its own channel
-- (waiter_channel), except `skip`. Sent after line_prelude.lua and
-- rw_mark.lua. Spelled with double quotes, so that embed_lua.py's
-- cluster_publish still matches the prelude's PUBLISH once; its own
-- substitution, rw_cluster_publish, makes this one an SPUBLISH.

local function wake_readers(i, channel, skip)
  if redis.call('EXISTS', line(i)) == 0 then
    return
  end
  for _, e in ipairs(redis.call('ZRANGE', line(i), 0, -1)) do
    local live = tonumber(redis.call('HGET', leases(i), e) or '0') >= clock()
    if live and not is_reader(e) then
      return
    end
    if live and e ~= skip then
      redis.call("PUBLISH", channel .. ':' .. redis.sha1hex(e), e)
    end
  end
end
