-- The fencing write-back's step, shared by the mutex's and the semaphore's
-- (fencing.hpp): raises the node record's counter to the token (a string)
-- where it is lower, never lowers it.

local function raise_fence(record, token)
  local c = tonumber(redis.call('HGET', record, 'fence') or '0')
  if c < tonumber(token) then
    redis.call('HSET', record, 'fence', token)
  end
end
