#pragma once

// SHA-1 (FIPS 180-1), only to compute the ids Redis gives scripts for
// EVALSHA. Not for anything security-related.

#include <string>
#include <string_view>

namespace redsync::detail {

/// SHA-1 of `data` as 40 lowercase hex digits, the form SCRIPT LOAD returns.
std::string sha1_hex(std::string_view data);

}  // namespace redsync::detail
