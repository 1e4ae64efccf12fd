#pragma once

// SHA-1, only to compute the ids Redis gives scripts for EVALSHA (and the
// names of their function libraries). Not for anything security-related.
// The digest is OpenSSL's; sha1.cpp is the only file that includes an
// OpenSSL header.

#include <string>
#include <string_view>

namespace redsync::detail {

/// SHA-1 of `data` as 40 lowercase hex digits, the form SCRIPT LOAD returns.
/// Throws std::runtime_error if OpenSSL cannot compute it (never expected:
/// SHA-1 is in OpenSSL's default provider).
std::string sha1_hex(std::string_view data);

}  // namespace redsync::detail
