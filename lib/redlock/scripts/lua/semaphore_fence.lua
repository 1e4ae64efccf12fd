-- The semaphore's fencing write-back. Reads the clock but never drops
-- expired permits (no prelude): KEYS[2] is the record.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) > now then
  local c = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0')
  if c < tonumber(ARGV[2]) then
    redis.call('HSET', KEYS[2], 'fence', ARGV[2])
  end
  return 1
end
return 0
