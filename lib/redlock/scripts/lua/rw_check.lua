-- A reader's read-only check, three-way as check.lua: 1 while it is a live
-- reader under the readers' mark, -1 where a writer holds the name, 0
-- otherwise. KEYS: the name, the readers' set; sent after rw_mark.lua.

local held = redis.call('GET', KEYS[1])
if held and string.byte(held, 1) ~= 0 then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if held == readers_mark and score and tonumber(score) > now then
  return 1
end
return 0
