#pragma once

// ASCII helpers for the URI code: case-insensitive schemes and parameter
// names, percent-decoding. Not locale-aware, on purpose: URIs are ASCII.

#include <cstddef>
#include <string_view>

namespace redsync::detail {

inline char ascii_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// The value of a hexadecimal digit, or -1.
inline int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether `s` starts with `lower_prefix` (given in lower case), ignoring case.
inline bool starts_with_nocase(std::string_view s, std::string_view lower_prefix) {
  if (s.size() < lower_prefix.size()) return false;
  for (std::size_t i = 0; i < lower_prefix.size(); ++i) {
    if (ascii_lower(s[i]) != lower_prefix[i]) return false;
  }
  return true;
}

}  // namespace redsync::detail
