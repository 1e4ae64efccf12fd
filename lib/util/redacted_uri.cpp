// Finding the passwords in a node URI and showing its parts without them,
// for the parser's error messages.

#include "util/redacted_uri.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redsync::detail {

namespace {

void append_printable(std::string& out, std::string_view text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
}

}  // namespace

redacted_uri::redacted_uri(std::string_view uri, bool user_info_to_last_at)
    : uri_(uri), secrets_(find_secrets(uri, user_info_to_last_at)) {}

// Where `uri` carries passwords: after the first ':' of the user info (see
// the constructor for where it ends), and in the value of every "password="
// query parameter after it, which no scheme here accepts but people write
// (redis-py reads redis://host?password=...). In order.
std::vector<redacted_uri::span> redacted_uri::find_secrets(std::string_view uri, bool user_info_to_last_at) {
  std::vector<span> out;
  std::size_t query_from = 0;
  if (const std::size_t scheme_end = uri.find("://"); scheme_end != std::string_view::npos) {
    const std::size_t authority = scheme_end + 3;
    const std::size_t at =
        user_info_to_last_at ? uri.rfind('@') : uri.substr(0, uri.find('/', authority)).rfind('@');
    if (at != std::string_view::npos && at >= authority) {
      query_from = at + 1;
      const std::size_t colon = uri.find(':', authority);
      if (colon < at) out.push_back({colon + 1, at - colon - 1});
    }
  }
  if (const std::size_t q = uri.find('?', query_from); q != std::string_view::npos) {
    for (std::size_t p = uri.find("password=", q); p != std::string_view::npos;) {
      const std::size_t value = p + 9;
      const std::size_t end = std::min(uri.find('&', value), uri.size());
      out.push_back({value, end - value});
      p = uri.find("password=", end);
    }
  }
  return out;
}

std::string redacted_uri::shown(std::string_view part) const {
  const std::size_t from = static_cast<std::size_t>(part.data() - uri_.data());
  const std::size_t to = from + part.size();
  std::string out;
  std::size_t at = from;
  for (const span& s : secrets_) {
    const std::size_t begin = std::max(s.pos, at);
    const std::size_t end = std::min(s.pos + s.len, to);
    if (begin >= end) continue;
    append_printable(out, uri_.substr(at, begin - at));
    out += "***";
    at = end;
  }
  append_printable(out, uri_.substr(at, to - at));
  return out;
}

std::string printable(std::string_view text) {
  std::string out;
  append_printable(out, text);
  return out;
}

}  // namespace redsync::detail
