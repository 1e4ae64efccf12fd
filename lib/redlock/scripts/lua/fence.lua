-- Fencing write-back. KEYS = first name, node record; ARGV = value, token.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  raise_fence(KEYS[2], ARGV[2])
  return 1
end
return 0
