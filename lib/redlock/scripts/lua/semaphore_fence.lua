-- The semaphore's fencing write-back (and an RWMutex reader's: its
-- readers' set and record as KEYS). Reads the clock but never drops
-- expired permits (no prelude): KEYS[2] is the record.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) > now then
  raise_fence(KEYS[2], ARGV[2])
  return 1
end
return 0
