// The node record's scripts: the fencing write-back and the repair's read
// and stamp (node_trust.hpp). Their Lua is lua/fence.lua,
// lua/record_read.lua and lua/record_stamp.lua, embedded at build time
// (embed_lua.py).

#include "redlock/scripts/script_cache.hpp"
#include "redlock/scripts/scripts.hpp"

namespace redsync::detail {

const lua_script& fence_script() {
  return embedded_script<lua::fence>();
}

const lua_script& record_read_script() {
  return embedded_script<lua::record_read>();
}

const lua_script& record_stamp_script() {
  return embedded_script<lua::record_stamp>();
}

}  // namespace redsync::detail
