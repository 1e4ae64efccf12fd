-- The semaphore's extension, sent after kind_mark.lua and
-- semaphore_prelude.lua.

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep_until_last()
return 1
