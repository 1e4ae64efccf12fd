-- A holder's extension: compare-and-PEXPIRE, optionally re-creating missing
-- keys (never overwriting another holder's value). A key a release reserved
-- for a waiter (its value starts with a NUL byte) reads as missing, as in
-- the release, and is never re-created over. KEYS and ARGV in scripts.hpp
-- (extend_script).

local values, missing, reserved = {}, 0, false
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v == false then
    missing = missing + 1
  elseif string.byte(v, 1) == 0 then
    reserved = true
  elseif v ~= ARGV[1] then
    return -1
  end
  values[i] = v
end
if reserved or (missing > 0 and ARGV[3] ~= '1') then
  return 0
end
for i = 1, #KEYS do
  if values[i] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  else
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
end
return 1
