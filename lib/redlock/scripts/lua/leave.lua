-- A waiter that gives up, or whose acquisition was confirmed, leaves the
-- lines; a name reserved for it (or for another waiter no longer at the
-- head) goes to the live head, or is freed. A name holding its value is
-- left alone: it is the confirmed holder's. Sent after leave_head.lua (or
-- rw_release_head.lua), line_prelude.lua, rw_mark.lua and rw_wake.lua;
-- KEYS and ARGV as release.lua's.

for i = 1, n do
  redis.call('ZREM', line(i), ARGV[1])
  redis.call('HDEL', leases(i), ARGV[1])
  settle(i, ARGV[2 + i], nil)
  -- A writer leaves while readers hold the name (an RWMutex's): the
  -- readers now at the front, up to the next writer, may join them, and
  -- would otherwise wait for their next poll. (A reader that leaves was
  -- blocking nobody.)
  if not is_reader(ARGV[1]) and redis.call('GET', KEYS[i]) == readers_mark then
    wake_readers(i, ARGV[2 + i], ARGV[1])
  end
end
return 1
