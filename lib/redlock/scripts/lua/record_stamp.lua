-- Repairs a node record: step (3). KEYS = node record; ARGV = counter floor,
-- identity, mark, since (server ms), window ms. Only if the record still
-- carries the mark read earlier (so it was not flushed, or marked anew,
-- since): raises the counter to at least the floor and the window to at
-- least ARGV's, stamps it (identity, since) unless already stamped for this
-- identity, and removes the mark. Returns 1 if applied, 0 if the mark was
-- gone.

local cur = redis.call('HMGET', KEYS[1], 'fence', 'run', 'pending', 'window')
if cur[3] ~= ARGV[3] then
  return 0
end
if tonumber(cur[1] or '0') < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1])
end
if tonumber(cur[4] or '0') < tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'window', ARGV[5])
end
if cur[2] ~= ARGV[2] then
  redis.call('HSET', KEYS[1], 'run', ARGV[2], 'since', ARGV[4])
end
redis.call('HDEL', KEYS[1], 'pending')
return 1
