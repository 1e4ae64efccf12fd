#pragma once

// A script's source with its SHA1, computed once, for the script files
// (scripts.cpp, record_scripts.cpp).

#include "redlock/scripts/script_call.hpp"
#include "util/sha1.hpp"

#include <string_view>

namespace redsync::detail {

template <const std::string_view& Source>
const lua_script& cached_script() {
  static const lua_script s{Source, sha1_hex(Source)};
  return s;
}

}  // namespace redsync::detail
