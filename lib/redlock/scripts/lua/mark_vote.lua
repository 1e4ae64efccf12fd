-- The cluster form of a script that answers a vote (its mark key is its
-- last KEY): `vote(t)` returns the answer table `t` with the server mark
-- appended (server_mark.hpp). The identity is computed as identify_server
-- builds it (node_identity.cpp): run_id, ':' master_replid, and
-- ':load=L/E' once the server run loaded a file.

local function vote(t)
  local here = KEYS[#KEYS]
  local mark
  if redis.call('OBJECT', 'ENCODING', here) == 'raw' then
    mark = redis.call('GET', here)
  else
    local info = '\n' .. redis.call('INFO', 'server', 'replication', 'persistence')
    local id = string.match(info, '\nrun_id:(%w+)') or ''
    local replid = string.match(info, '\nmaster_replid:(%w+)')
    if replid then
      id = id .. ':' .. replid
    end
    local loaded = string.match(info, '\nrdb_last_load_keys_loaded:(%d+)')
    local expired = string.match(info, '\nrdb_last_load_keys_expired:(%d+)')
    if (loaded and loaded ~= '0') or (expired and expired ~= '0') then
      id = id .. ':load=' .. (loaded or '') .. '/' .. (expired or '')
    end
    mark = redis.sha1hex(id)
    redis.set_repl(redis.REPL_NONE)
    redis.call('SETRANGE', here, 0, mark)
    redis.set_repl(redis.REPL_ALL)
  end
  t[#t + 1] = mark
  return t
end
