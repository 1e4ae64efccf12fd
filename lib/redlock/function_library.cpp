// Generating a script's function library from its Lua source.

#include "redlock/function_library.hpp"

#include "redlock/scripts.hpp"

#include <fmt/format.h>

namespace redsync::detail {

std::string function_name(const lua_script& s) {
  return "redsync_" + s.sha1;
}

std::string function_library(const lua_script& s) {
  // Only the check script reads without writing; every other one may write
  // (even the record read, which sets a mark).
  const bool read_only = &s == &check_script();
  const std::string name = function_name(s);
  // A script's source is a Lua chunk; as a function body, the chunk's
  // globals KEYS and ARGV become the callback's parameters, and its
  // top-level `return`s return from the function.
  return fmt::format(
      "#!lua name={0}\n"
      "redis.register_function{{function_name='{0}', flags={{{1}}}, callback=function(KEYS, ARGV)\n"
      "{2}\n"
      "end}}\n",
      name, read_only ? "'no-writes'" : "", s.source);
}

}  // namespace redsync::detail
