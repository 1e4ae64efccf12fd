// Just enough JSON for `status --json` and `ping --json`: one object per
// line, built with fmt, strings escaped here.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>

namespace redsync::cli {

/// `s` as a JSON string literal, quotes included. Redis stores bytes, not
/// text: a byte that does not belong to a valid UTF-8 sequence becomes
/// U+FFFD, so the output is always valid JSON.
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            out += fmt::format("\\u{:04x}", c);
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A UTF-8 sequence: its length from the lead byte, then continuation
    // bytes (overlong forms and surrogates are not worth rejecting here).
    const std::size_t len = c >= 0xf0 && c <= 0xf4   ? 4
                            : c >= 0xe0 && c <= 0xef ? 3
                            : c >= 0xc2 && c <= 0xdf ? 2
                                                     : 0;
    bool valid = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; valid && k < len; ++k)
      valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (valid) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
  return out;
}

/// A JSON string, or null.
inline std::string json_string_or_null(const std::optional<std::string>& s) {
  return s ? json_string(*s) : std::string("null");
}

/// A JSON number, or null.
template <class T>
std::string json_number_or_null(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : std::string("null");
}

inline const char* json_bool(bool b) {
  return b ? "true" : "false";
}

}  // namespace redsync::cli
