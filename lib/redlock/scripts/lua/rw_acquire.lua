-- A reader's acquisition (the shared side of an RWMutex; docs/api.md,
-- "Read-write locks", has the argument). A node grants a reader while no
-- writer holds the name there or has it reserved, and no live writer waits
-- ahead of the reader in the line (a reader not in line yet arrives behind
-- everyone): readers and writers are served in arrival order, consecutive
-- readers together. The grant adds the reader to the readers' set and keeps
-- the readers' mark in the lock key until the latest reader's expiry. The
-- answers are acquire.lua's, so the mutex's client code drives it. Sent
-- after rw_acquire_head.lua, line_prelude.lua, kind_mark.lua, rw_mark.lua,
-- rw_wake.lua and grant_record.lua (and mark_vote.lua on a cluster member).

local record = KEYS[2]
local value = ARGV[1]
local mode = ARGV[5]
local held = redis.call('GET', KEYS[1])
-- Rule X: a semaphore's permits hold the name.
if held == semaphore_mark then
  return -5
end
-- Rule A (acquire.lua): where our arrival moved back, our old rank here must
-- not put us ahead of anyone.
if mode ~= '0' then
  local score = redis.call('ZSCORE', line(), value)
  if score and tonumber(score) < tonumber(ARGV[3]) then
    redis.call('ZADD', line(), ARGV[3], value)
  end
end
-- Open to a reader: free, held by readers, or reserved for a reader (a
-- release handed the name to the reader at the head of the line).
local open = not held or held == readers_mark or
  (is_reservation(held) and is_reader(string.sub(held, #reserved_prefix + 1)))
-- A value is one reader: a member already in the set (another holder
-- made with the same fixed value, or an undo of ours not run yet) refuses,
-- as a writer's SET NX refuses its own value, so that one release can never
-- end another's hold. (Expired members go first: a hold of this value that
-- ended without a release must not refuse it.)
if open then
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', clock())
  if redis.call('ZSCORE', readers, value) then
    open = false
  end
end
local in_line = 0
if open and redis.call('EXISTS', line()) == 1 then
  live_head(1)
  for _, e in ipairs(redis.call('ZRANGE', line(), 0, -1)) do
    if e == value then
      in_line = 1
      break
    end
    if not is_reader(e) and tonumber(redis.call('HGET', leases(), e) or '0') >= clock() then
      open = false
      break
    end
  end
end
if open then
  redis.call('ZADD', readers, clock() + tonumber(ARGV[2]), value)
  keep_until_last_reader(KEYS[1], readers, clock())
  -- As a writer's, the grant keeps our place until it is confirmed (rule L).
  if in_line == 1 then
    keep_place(1, tonumber(ARGV[4]))
  end
  -- The first reader of a run here wakes the live readers queued up to the
  -- first live writer: they share the name with it. Later readers of the
  -- run find the mark and wake nobody.
  if held ~= readers_mark then
    wake_readers(1, ARGV[7], value)
  end
  local token, run, age, window = grant_record(record, clock(), tonumber(ARGV[2]))
  return {token, run, age, window, in_line}
end
if mode == '0' then
  settle(1, ARGV[7], nil)
  return false
end
-- Join, or stay in, the line, as acquire.lua does for one name.
local lease = tonumber(ARGV[4])
local evicted = false
local score = redis.call('ZSCORE', line(), value)
if score and tonumber(redis.call('HGET', leases(), value) or '0') < clock() then
  evicted = true
  redis.call('ZADD', line(), ARGV[6], value)
elseif not score and mode == '2' then
  evicted = true
  redis.call('ZADD', line(), ARGV[6], value)
elseif not score then
  redis.call('ZADD', line(), ARGV[3], value)
end
keep_place(1, lease)
local answer = -1
if live_head(1) == value then
  answer = -2
end
settle(1, ARGV[7], value)
if evicted then
  answer = answer - 2
end
return answer
