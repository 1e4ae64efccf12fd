-- The semaphore's release, sent after kind_mark.lua and
-- semaphore_prelude.lua. The cluster variant publishes with SPUBLISH
-- (embed_lua.py: cluster_publish).

local removed = redis.call('ZREM', KEYS[1], ARGV[1])
keep_until_last()
if removed == 1 and ARGV[3] == '1' then
  redis.call('PUBLISH', ARGV[2], string.match(ARGV[1], '^(%d+):'))
end
return removed
