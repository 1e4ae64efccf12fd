#pragma once

// A script as the build embedded it: its text and SHA1 both come from
// redlock/scripts/embedded_lua.hpp, which embed_lua.py generates from lua/*.lua
// at build time, so nothing is hashed at run time (the unit test
// embedded_lua_test.cpp checks every SHA1 against its text).

#include "redlock/scripts/embedded_lua.hpp"
#include "redlock/scripts/script_call.hpp"

#include <string>

namespace redsync::detail {

// The script `Text`, one object for the program: a call, a script's cluster
// variant and the function library refer to scripts by address.
template <const lua::script_text& Text>
const lua_script& embedded_script() {
  static const lua_script s{Text.source, std::string(Text.sha1)};
  return s;
}

// The script `Text`, naming `Cluster` as what a cluster member runs instead
// (lua_script::cluster).
template <const lua::script_text& Text, const lua::script_text& Cluster>
const lua_script& embedded_script() {
  static const lua_script s{Text.source, std::string(Text.sha1), &embedded_script<Cluster>()};
  return s;
}

}  // namespace redsync::detail
