// The server mark (server_mark.hpp).

#include "redlock/scripts/server_mark.hpp"

#include "redlock/scripts/cluster_keys.hpp"
#include "util/sha1.hpp"

namespace redsync::detail {

std::string server_mark(std::string_view identity) {
  return sha1_hex(identity);
}

std::string cluster_server_mark_key(std::uint16_t slot) {
  return cluster_record_key(slot) + ":server";
}

// The identity as identify_server builds it (node_identity.cpp): run_id,
// ':' master_replid, and ':load=L/E' once the server run loaded a file.
const std::string_view mark_vote = R"lua(
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
)lua";

}  // namespace redsync::detail
