-- Release (ARGV[2] = "0"): the holder leaves every line it may still be in,
-- then lets go of each name holding its value, or reserved for it. Undo
-- (ARGV[2] = "1", a failed attempt): the caller keeps its place, and each
-- name holding its value goes back to what rule R makes of it: reserved for
-- the live head (the caller itself, if it is the head) or free.
-- Sent after release_head.lua and line_prelude.lua; KEYS and ARGV in
-- scripts.hpp (release_script).

local value = ARGV[1]
local undo = ARGV[2] == '1'
local reserved_for_us = reserved_prefix .. value
local mine, foreign = 0, 0
for i = 1, n do
  if not undo then
    redis.call('ZREM', line(i), value)
    redis.call('HDEL', leases(i), value)
  end
  local v = redis.call('GET', KEYS[i])
  if v == value then
    mine = mine + 1
    redis.call('DEL', KEYS[i])
    settle(i, ARGV[2 + i], value)
  elseif v == reserved_for_us then
    if not undo then
      settle(i, ARGV[2 + i], value)
    end
  elseif v and not is_reservation(v) then
    foreign = foreign + 1
  end
end
if foreign > 0 then
  return -1
end
if mine > 0 then
  return 1
end
return 0
