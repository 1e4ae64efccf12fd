-- A waiter that gives up, or whose acquisition was confirmed, leaves the
-- lines; a name reserved for it (or for another waiter no longer at the
-- head) goes to the live head, or is freed. A name holding its value is
-- left alone: it is the confirmed holder's. Sent after leave_head.lua and
-- line_prelude.lua; KEYS and ARGV as release.lua's.

for i = 1, n do
  redis.call('ZREM', line(i), ARGV[1])
  redis.call('HDEL', leases(i), ARGV[1])
  settle(i, ARGV[2 + i], nil)
end
return 1
