// The mutex's lock scripts that read or write a waiting line (acquire,
// release, leave; their Lua is in lua/, embedded at build time by
// embed_lua.py with each script's SHA1), and the keys and channel derived
// from a lock name. The holder's extend and check are in holder_scripts.cpp,
// the node record's scripts in record_scripts.cpp.

#include "redlock/scripts/scripts.hpp"

#include "redlock/scripts/script_cache.hpp"

namespace redsync::detail {

// Every lock script takes the lock's names as KEYS (one for a plain lock,
// several for a multi-name lock, always in sorted order) and is
// all-or-nothing on a node. Per-name keys follow the names in the same order.

// Each names its cluster variant (SPUBLISH, and for the acquisition the
// server mark: server_mark.hpp); the standalone bytes are the ones every
// standalone member has run (same SHA1).
const lua_script& acquire_script() {
  return embedded_script<lua::acquire, lua::acquire_cluster>();
}

const lua_script& leave_script() {
  return embedded_script<lua::leave, lua::leave_cluster>();
}

std::string line_key(std::string_view name) {
  return std::string(name) + ":redsync-line";
}
std::string lease_key(std::string_view name) {
  return std::string(name) + ":redsync-leases";
}
std::string reserved_value(std::string_view head) {
  std::string v(reserved_value_prefix, sizeof reserved_value_prefix - 1);
  v += head;
  return v;
}
std::string release_channel(std::string_view name) {
  return "redsync:release:" + std::string(name);
}

const lua_script& release_script() {
  return embedded_script<lua::release, lua::release_cluster>();
}

}  // namespace redsync::detail
