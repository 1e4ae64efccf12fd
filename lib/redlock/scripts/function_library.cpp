// Generating a script's function library from its Lua source.

#include "redlock/scripts/function_library.hpp"

#include "redlock/scripts/lock_scripts.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "util/sha1.hpp"

#include <fmt/format.h>

#include <array>
#include <utility>
#include <vector>

namespace redsync::detail {

namespace {

// A function's flags. Without flags Redis refuses to start a function while
// the server is over its maxmemory; a holder must still be able to let go
// and to extend there (eval mode can: DEL and PEXPIRE do not grow memory),
// so release, leave and extend may run over it ('allow-oom': their writes
// are a delete, an expiry, or a short reservation). The check only reads.
// Acquire and the record scripts are refused over maxmemory: a node that
// cannot take a new lock should not vote for one.
// A script's cluster variant (lua_script::cluster) has the script's flags.
bool is(const lua_script& s, const lua_script& script) {
  return &s == &script || &s == script.cluster;
}

std::string_view flags_of(const lua_script& s) {
  if (is(s, check_script())) return "'no-writes'";
  if (is(s, release_script()) || is(s, leave_script()) || is(s, extend_script())) return "'allow-oom'";
  // A semaphore's holder too: its release and extension only remove or
  // re-score a permit, and a leave only takes a waiter out of the line.
  if (is(s, semaphore_release_script()) || is(s, semaphore_extend_script()) ||
      is(s, semaphore_leave_script()))
    return "'allow-oom'";
  // An RWMutex reader's, for the same reasons as a writer's.
  const lock_scripts& reader = scripts_for(hold_kind::shared);
  if (is(s, reader.check)) return "'no-writes'";
  if (is(s, reader.release) || is(s, reader.leave) || is(s, reader.extend)) return "'allow-oom'";
  return "";
}

// What the library's name is the hash of: everything in it but the name.
std::string named_part(const lua_script& s) {
  return fmt::format("flags={{{}}}\n{}", flags_of(s), s.source);
}

std::string compute_name(const lua_script& s) {
  return "redsync_" + sha1_hex(named_part(s));
}

}  // namespace

std::string function_name(const lua_script& s) {
  // The library's scripts are a fixed set of statics: their names are
  // hashed once, not on every FCALL.
  static const auto known = [] {
    const lock_scripts& reader = scripts_for(hold_kind::shared);
    const std::array<const lua_script*, 19> scripts = {&acquire_script(),
                                                       &leave_script(),
                                                       &fence_script(),
                                                       &record_read_script(),
                                                       &record_stamp_script(),
                                                       &release_script(),
                                                       &extend_script(),
                                                       &check_script(),
                                                       &semaphore_acquire_script(),
                                                       &semaphore_release_script(),
                                                       &semaphore_extend_script(),
                                                       &semaphore_fence_script(),
                                                       &semaphore_leave_script(),
                                                       &reader.acquire,
                                                       &reader.leave,
                                                       &reader.release,
                                                       &reader.extend,
                                                       &reader.check,
                                                       &reader.fence};
    std::vector<std::pair<const lua_script*, std::string>> names;
    for (const lua_script* s : scripts) {
      names.emplace_back(s, compute_name(*s));
      if (s->cluster) names.emplace_back(s->cluster, compute_name(*s->cluster));
    }
    return names;
  }();
  for (const auto& [script, name] : known)
    if (script == &s) return name;
  return compute_name(s);
}

std::string function_library(const lua_script& s) {
  const std::string name = function_name(s);
  // A script's source is a Lua chunk; as a function body, the chunk's
  // globals KEYS and ARGV become the callback's parameters, and its
  // top-level `return`s return from the function.
  return fmt::format(
      "#!lua name={0}\n"
      "redis.register_function{{function_name='{0}', flags={{{1}}}, callback=function(KEYS, ARGV)\n"
      "{2}\n"
      "end}}\n",
      name, flags_of(s), s.source);
}

}  // namespace redsync::detail
