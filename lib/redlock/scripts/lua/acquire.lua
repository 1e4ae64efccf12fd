-- The acquisition: SET on every name and the node's fencing counter in one
-- atomic step, and the caller's place in the lines. See scripts.hpp for
-- KEYS, ARGV, the answers and the line's rules. Sent after acquire_head.lua,
-- line_prelude.lua and kind_mark.lua. On a cluster member the yes goes through
-- mark_vote.lua's vote(), which appends the server mark (embed_lua.py:
-- acquire_votes).

local record = KEYS[n + 1]
local value = ARGV[1]
local mode = ARGV[5]
-- Rule A first: where our arrival moved back (we were evicted on some
-- node), our old rank here must not make us the head.
if mode ~= '0' then
  for i = 1, n do
    local score = redis.call('ZSCORE', line(i), value)
    if score and tonumber(score) < tonumber(ARGV[3]) then
      redis.call('ZADD', line(i), ARGV[3], value)
    end
  end
end
-- Rule H: only the live head of every line the names have (or anyone, on
-- names nobody waits for) may take them.
local head_everywhere = true
local in_line = 0
for i = 1, n do
  if redis.call('EXISTS', line(i)) == 1 then
    local h = live_head(i)
    if h == value then
      in_line = 1
    elseif h then
      head_everywhere = false
    end
  end
end
-- A name is open to us when it is free or reserved (for anyone: rule H
-- already made us the one it is reserved for, in effect).
local won = false
if head_everywhere then
  if n == 1 then
    won = redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2])
    if not won and is_reservation(redis.call('GET', KEYS[1])) then
      won = redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
    end
  else
    won = true
    for i = 1, n do
      local v = redis.call('GET', KEYS[i])
      if v and not is_reservation(v) then
        won = false
        break
      end
    end
    if won then
      for i = 1, n do
        redis.call('SET', KEYS[i], value, 'PX', ARGV[2])
      end
    end
  end
end
if won then
  -- We stay in the lines until the acquisition is confirmed (rule L): if
  -- it fails on the other nodes, the undo gives these names back to us.
  if in_line == 1 then
    for i = 1, n do
      if redis.call('ZSCORE', line(i), value) then
        keep_place(i, tonumber(ARGV[4]))
      end
    end
  end
  local token, run, age, window = grant_record(record, clock(), tonumber(ARGV[2]))
  return {token, run, age, window, in_line}
end
-- Rule X: a name a semaphore's permits hold (its lock key holds the kind
-- mark) refuses us with -5, before we join or refresh any line: nothing
-- here will hand it to a waiter (only the semaphore's last release frees it).
for i = 1, n do
  if redis.call('GET', KEYS[i]) == semaphore_mark then
    return -5
  end
end
if mode == '0' then
  for i = 1, n do
    settle(i, ARGV[6 + i], nil)
  end
  return false
end
-- Join, or stay in, every line (rule A).
local lease = tonumber(ARGV[4])
local evicted = false
for i = 1, n do
  local score = redis.call('ZSCORE', line(i), value)
  if score and tonumber(redis.call('HGET', leases(i), value) or '0') < clock() then
    -- Still listed behind a live head, but our lease ran out: we were gone
    -- (live_head only drops the expired at the front). Same as evicted.
    evicted = true
    redis.call('ZADD', line(i), ARGV[6], value)
  elseif not score and mode == '2' then
    -- We were in this line and are not any more: our lease ran out (or the
    -- node lost the line). Back of the line, at this attempt's time.
    evicted = true
    redis.call('ZADD', line(i), ARGV[6], value)
  elseif not score then
    redis.call('ZADD', line(i), ARGV[3], value)
  end
  keep_place(i, lease)
end
local first = true
for i = 1, n do
  if live_head(i) ~= value then
    first = false
  end
  settle(i, ARGV[6 + i], value)
end
local answer = -1
if first then
  answer = -2
end
if evicted then
  answer = answer - 2
end
return answer
