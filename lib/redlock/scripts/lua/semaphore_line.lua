-- The permits' waiting line (semaphore_scripts.hpp, rule F): a sorted set
-- of waiter values scored by arrival (the same number on every node, so the
-- nodes agree on the order) and a hash of each waiter's lease (server ms).
-- A waiter whose lease ran out is dropped when a script passes it: a
-- crashed waiter holds its place only until then. Sent after
-- semaphore_prelude.lua (`now`).

-- Takes waiter w out of the line.
local function drop_waiter(line, leases, w)
  redis.call('ZREM', line, w)
  redis.call('HDEL', leases, w)
end
-- Whether waiter w's lease is live; drops it from the line otherwise.
local function waiter_live(line, leases, w)
  if tonumber(redis.call('HGET', leases, w) or '0') >= now then
    return true
  end
  drop_waiter(line, leases, w)
  return false
end
-- Calls visit(w, arrival) on the line's entries from the head, a page at a
-- time, until it returns true or the line ends (so a script reads the head
-- of a long line, not all of it). visit returns, second, whether it took w
-- out of the line, so that the next page starts where it should.
local function scan_line(line, visit)
  local from, page = 0, 16
  while true do
    local got = redis.call('ZRANGE', line, from, from + page - 1, 'WITHSCORES')
    local dropped = 0
    for i = 1, #got, 2 do
      local stop, gone = visit(got[i], tonumber(got[i + 1]))
      if gone then
        dropped = dropped + 1
      end
      if stop then
        return
      end
    end
    if #got < 2 * page then
      return
    end
    from = from + page - dropped
  end
end
-- How many live waiters are ahead of `waiter`, counting at most `free`. A
-- waiter in line is ranked by its entry; one not in line by `arrival` (nil:
-- a call that does not queue, behind everyone), behind those that arrived
-- at the same microsecond. `each(w)`, when given, is called on each live
-- waiter ahead and returns false to have it not counted (it dropped w).
local function waiters_ahead(line, leases, waiter, arrival, free, each)
  local ahead = 0
  if free <= 0 or redis.call('EXISTS', line) == 0 then
    return ahead
  end
  scan_line(line, function(w, s)
    if w == waiter or (arrival and s > arrival) then
      return true, false
    end
    if not waiter_live(line, leases, w) then
      return false, true
    end
    if each and not each(w) then
      return false, true
    end
    ahead = ahead + 1
    return ahead >= free, false
  end)
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
