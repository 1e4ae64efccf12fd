-- A grant's part of the node record (node_trust.hpp), shared by every
-- acquisition (a mutex's, a reader's, a permit's): the next fencing token,
-- the record's run and its age (server ms since its stamp, -1 without
-- one), and its window raised to the grant's expiry.

local function grant_record(record, now, expiry)
  local token = redis.call('HINCRBY', record, 'fence', 1)
  local stamp = redis.call('HMGET', record, 'run', 'since', 'window')
  local age = -1
  if stamp[2] then
    age = now - tonumber(stamp[2])
  end
  local window = tonumber(stamp[3] or '0')
  if window < expiry then
    window = expiry
    redis.call('HSET', record, 'window', window)
  end
  return token, stamp[1] or '', age, window
end
