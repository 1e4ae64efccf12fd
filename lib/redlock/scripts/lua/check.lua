-- A holder's read-only ownership check, three-way like the others (a
-- reservation reads as missing). KEYS and ARGV in scripts.hpp
-- (check_script).

local missing = 0
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v == false or string.byte(v, 1) == 0 then
    missing = missing + 1
  elseif v ~= ARGV[1] then
    return -1
  end
end
if missing > 0 then
  return 0
end
return 1
