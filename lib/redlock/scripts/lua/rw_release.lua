-- A reader lets go (ARGV[2] = "0": it leaves the line too) or undoes a
-- failed attempt (ARGV[2] = "1": it keeps its place). Where it was the last
-- live reader, the readers' mark goes and rule R hands the name to the live
-- head of the line (a writer waiting for the readers to drain), waking it;
-- otherwise the mark follows the latest remaining reader. Sent after
-- rw_release_head.lua, line_prelude.lua and rw_mark.lua. Answers as
-- release.lua's: 1 ours, 0 gone, -1 a writer holds the name here.

local value = ARGV[1]
if ARGV[2] ~= '1' then
  redis.call('ZREM', line(), value)
  redis.call('HDEL', leases(), value)
end
local mine = redis.call('ZREM', readers, value)
local held = redis.call('GET', KEYS[1])
if held == readers_mark then
  if keep_until_last_reader(KEYS[1], readers, clock()) then
    settle(1, ARGV[3], value)
  end
elseif not held or is_reservation(held) then
  settle(1, ARGV[3], value)
elseif mine == 0 then
  return -1
end
return mine
