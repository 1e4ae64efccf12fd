// A holder's scripts that never touch a waiting line: extend and check (the
// lock scripts that do are in scripts.cpp). Their Lua is lua/extend.lua and
// lua/check.lua, embedded at build time (embed_lua.py).

#include "redlock/scripts/script_cache.hpp"
#include "redlock/scripts/scripts.hpp"

namespace redsync::detail {

const lua_script& extend_script() {
  return embedded_script<lua::extend>();
}

const lua_script& check_script() {
  return embedded_script<lua::check>();
}

}  // namespace redsync::detail
