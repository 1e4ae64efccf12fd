#pragma once

// A whole decimal integer as Redis writes one in a bulk string (a hash
// field, a TIME element): nothing before or after it.

#include <charconv>
#include <optional>
#include <string_view>

namespace redsync::cli {

inline std::optional<long long> reply_number(std::string_view s) {
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace redsync::cli
