-- The permits' waiting line (semaphore_scripts.hpp, rule F): a sorted set
-- of waiter values scored by arrival (the same number on every node, so the
-- nodes agree on the order) and a hash of each waiter's lease (server ms).
-- A waiter whose lease ran out is dropped when a script passes it: a
-- crashed waiter holds its place only until then. Sent after
-- semaphore_prelude.lua (`now`).

-- Whether waiter w's lease is live; drops it from the line otherwise.
local function waiter_live(line, leases, w)
  if tonumber(redis.call('HGET', leases, w) or '0') >= now then
    return true
  end
  redis.call('ZREM', line, w)
  redis.call('HDEL', leases, w)
  return false
end
-- How many live waiters are ahead of `waiter`, counting at most `free`. A
-- waiter in line is ranked by its entry; one not in line by `arrival` (nil:
-- a call that does not queue, behind everyone).
local function waiters_ahead(line, leases, waiter, arrival, free)
  local ahead = 0
  if free <= 0 or redis.call('EXISTS', line) == 0 then
    return ahead
  end
  local entries = redis.call('ZRANGE', line, 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    local w, s = entries[i], tonumber(entries[i + 1])
    if w == waiter or (arrival and (s > arrival or (s == arrival and w > waiter))) then
      break
    end
    if waiter_live(line, leases, w) then
      ahead = ahead + 1
      if ahead >= free then
        break
      end
    end
  end
  return ahead
end
-- Puts `waiter` in line at its arrival (where it is not there yet) and
-- refreshes its lease; the line lives at least as long as that lease.
local function join_line(line, leases, waiter, arrival, lease)
  redis.call('ZADD', line, 'NX', arrival, waiter)
  redis.call('HSET', leases, waiter, now + lease)
  if redis.call('PTTL', line) < lease then
    redis.call('PEXPIRE', line, lease)
  end
  if redis.call('PTTL', leases) < lease then
    redis.call('PEXPIRE', leases, lease)
  end
end
