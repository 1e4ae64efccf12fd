-- The semaphore's acquisition, sent after kind_mark.lua,
-- semaphore_prelude.lua, semaphore_line.lua and semaphore_wake.lua. On a cluster member
-- mark_vote.lua comes between them and a grant goes through vote()
-- (embed_lua.py: semaphore_votes). The TEST ONLY count-only variant drops
-- the slot test (embed_lua.py: count_only).

-- Rule X first: the name's lock key holds a Mutex's value or a waiter's
-- reservation (anything but our kind mark): held as a mutex, refused,
-- nothing written.
local held = redis.call('GET', KEYS[3])
if held and held ~= semaphore_mark then
  return {-3}
end
local member, slot, k = ARGV[1], ARGV[2], tonumber(ARGV[3])
local waiter, joins = ARGV[5], ARGV[8] == '1'
local line, leases = KEYS[5], KEYS[6]
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
local stored = redis.call('GET', KEYS[2])
if stored and #live > 0 and tonumber(stored) ~= k then
  return {-2, tonumber(stored)}
end
local others, count, slot_live = {}, 0, false
for _, m in ipairs(live) do
  if m ~= member then
    local s = string.match(m, '^(%d+):')
    count = count + 1
    others[#others + 1] = s
    if s == slot then
      slot_live = true
    end
  end
end
local listed = table.concat(others, ',')
-- Rule F: the live waiters that arrived before us take the free permits
-- first. `open`: a permit is free for us here, whatever its slot.
local open = false
if count < k then
  local arrival = joins and tonumber(ARGV[6]) or nil
  open = waiters_ahead(line, leases, waiter, arrival, k - count) < k - count
  if not open then
    -- Permits are free here, yet earlier waiters come first: tell them (a
    -- permit can come free without a release, when it expires), and count
    -- only those that hear it (rate: the refused callers' own attempts).
    local nudge = function(w)
      return notify(line, leases, w, ARGV[9], '')
    end
    open = waiters_ahead(line, leases, waiter, arrival, k - count, nudge) < k - count
  end
end
if slot_live or not open then
  if joins then
    join_line(line, leases, waiter, ARGV[6], tonumber(ARGV[7]))
  end
  return {-1, listed, open and 1 or 0}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), member)
redis.call('SET', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], semaphore_mark)
keep_until_last()
-- Out of the line: the grant is counted among the live permits now. The
-- undo of an attempt that fails puts the waiter back at its arrival.
if waiter ~= '' and redis.call('ZREM', line, waiter) == 1 then
  redis.call('HDEL', leases, waiter)
end
local record = KEYS[4]
local token, run, age, window = grant_record(record, now, tonumber(ARGV[4]))
return {token, run, age, window, listed}
