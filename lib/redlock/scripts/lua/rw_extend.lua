-- A reader's extension: its expiry in the readers' set pushed back to
-- ARGV[2] ms from now, the readers' mark kept until the latest reader's.
-- With ARGV[3] = "1" a reader gone from this node is added back. Never
-- over a writer: where a writer holds the name (its value) the answer is
-- -1, where the name is reserved for a waiter (or a semaphore's) 0, as
-- extend.lua answers. KEYS: the name, the readers' set; sent after
-- rw_mark.lua.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = redis.call('GET', KEYS[1])
if held and held ~= readers_mark then
  if string.byte(held, 1) ~= 0 then
    return -1
  end
  return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) and ARGV[3] ~= '1' then
  return 0
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
keep_until_last_reader(KEYS[1], KEYS[2], now)
return 1
