#pragma once

// The scripts a Mutex's calls send, by the kind of hold it takes: a
// writer's, which is the mutex's own (scripts.hpp), or an RWMutex reader's
// (lua/rw_*.lua; the argument in docs/api.md, "Read-write locks"). The two
// sets answer alike, so one client drives both; only their KEYS differ
// (lock_keys.hpp: a reader's carry the readers' set).

#include "redlock/scripts/script_call.hpp"

#include <string>
#include <string_view>

namespace redsync::detail {

enum class hold_kind : unsigned char {
  exclusive,  // a Mutex, or an RWMutex's writer
  shared,     // an RWMutex's reader
};

struct lock_scripts {
  const lua_script& acquire;
  const lua_script& leave;
  const lua_script& release;  // also the undo of a failed attempt
  const lua_script& extend;
  const lua_script& check;
  const lua_script& fence;
  // Whether a first attempt may go as the MULTI/EXEC transaction
  // (fast_acquire.hpp): a plain SET NX, a writer's only.
  bool transaction;
};

const lock_scripts& scripts_for(hold_kind kind);

// A reader's value, its entry in the line and its member of the readers'
// set, starts with this byte (rw_mark.lua: is_reader); no writer's may.
inline constexpr char reader_value_tag = '\x01';

// The readers' set of a name: each live reader scored by its expiry (server ms).
std::string readers_key(std::string_view name);

}  // namespace redsync::detail
