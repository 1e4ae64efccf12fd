-- A reader's fencing write-back: as fence.lua, for a member of the
-- readers' set. KEYS = the readers' set, node record; ARGV = value, token.

if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local c = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0')
  if c < tonumber(ARGV[2]) then
    redis.call('HSET', KEYS[2], 'fence', ARGV[2])
  end
  return 1
end
return 0
