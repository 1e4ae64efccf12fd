// Finding the passwords in a node URI and showing its parts without them,
// for the parser's error messages.

#include "util/redacted_uri.hpp"

#include <fmt/format.h>
#include "util/ascii.hpp"

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

// The parameter names clients read a password from (redis-py: password;
// others: pass, passwd, pwd, auth, auth_pass, ...). No scheme here accepts
// any of them, but people write them, and the parser's messages show the
// URI they are in. Matched anywhere, so "auth_pass" and "requirepass" are
// caught through "pass": masking too much costs nothing.
constexpr std::string_view secret_names[] = {"password", "passwd", "pass", "pwd", "auth", "secret", "token"};

// If `uri` at `pos` spells `name` followed by '=', case-insensitively and
// with any character percent-encoded (as a parser that decodes names before
// comparing them would read it), where its value starts; else npos.
std::size_t value_after_name(std::string_view uri, std::size_t pos, std::string_view name) {
  std::size_t i = pos;
  const auto next = [&]() -> int {
    if (i >= uri.size()) return -1;
    if (uri[i] == '%' && i + 2 < uri.size() && hex_digit_value(uri[i + 1]) >= 0 &&
        hex_digit_value(uri[i + 2]) >= 0) {
      const int c = hex_digit_value(uri[i + 1]) * 16 + hex_digit_value(uri[i + 2]);
      i += 3;
      return c;
    }
    return static_cast<unsigned char>(uri[i++]);
  };
  for (const char expected : name) {
    const int c = next();
    if (c < 0 || ascii_lower(static_cast<char>(c)) != expected) return std::string_view::npos;
  }
  return next() == '=' ? i : std::string_view::npos;
}

}  // namespace

redacted_uri::redacted_uri(std::string_view uri, bool user_info_to_last_at)
    : uri_(uri), secrets_(find_secrets(uri, user_info_to_last_at)) {}

// Where `uri` carries secrets, in order:
// - the user info (see the constructor for where it ends; a URI without
//   "://" has it before its last '@', as in "default:pw@host:6379" where
//   the scheme was forgotten): after its first ':' when a password follows
//   it, else all of it, since Lettuce and others read "redis://word@host"
//   as a password (and "word:@host" is often the same mistake);
// - the value of every parameter named in secret_names, up to the next raw
//   '&' (in the query, but also in a path or fragment: anywhere a message
//   may show).
std::vector<redacted_uri::span> redacted_uri::find_secrets(std::string_view uri, bool user_info_to_last_at) {
  std::vector<span> out;
  std::size_t authority = std::string_view::npos;
  std::size_t at = std::string_view::npos;
  if (const std::size_t scheme_end = uri.find("://"); scheme_end != std::string_view::npos) {
    authority = scheme_end + 3;
    at = user_info_to_last_at ? uri.rfind('@') : uri.substr(0, uri.find('/', authority)).rfind('@');
  } else if (!starts_with_nocase(uri, "unix:")) {
    authority = 0;
    at = uri.rfind('@');
  }
  const bool has_user_info = at != std::string_view::npos && at >= authority;
  if (has_user_info) {
    const std::size_t colon = uri.substr(0, at).find(':', authority);
    if (colon != std::string_view::npos && colon + 1 < at) {
      out.push_back({colon + 1, at - colon - 1});
    } else {
      out.push_back({authority, std::min(colon, at) - authority});
    }
  }
  // Everywhere, the user name included: "unix:x://h?password=pw:x@y" reads
  // as user info, but the parser may see a path and a query there, whose
  // value runs on past the '@'.
  // Not inside the masked user info: what it holds is hidden whatever it
  // spells, and a name there would extend the mask past the '@' only
  // when the password happens to spell one.
  const std::size_t skip_from = out.empty() ? uri.size() : out.front().pos;
  const std::size_t skip_to = out.empty() ? uri.size() : out.front().pos + out.front().len;
  for (std::size_t p = 0; p < uri.size();) {
    if (p >= skip_from && p < skip_to) {
      p = skip_to;
      continue;
    }
    std::size_t value = std::string_view::npos;
    for (const std::string_view name : secret_names) {
      value = std::min(value, value_after_name(uri, p, name));
    }
    if (value == std::string_view::npos) {
      ++p;
      continue;
    }
    const std::size_t end = std::min(uri.find('&', value), uri.size());
    out.push_back({value, end - value});
    p = end;
  }
  // shown() wants them in order and apart.
  std::sort(out.begin(), out.end(), [](const span& a, const span& b) { return a.pos < b.pos; });
  std::vector<span> merged;
  for (const span& s : out) {
    if (!merged.empty() && s.pos <= merged.back().pos + merged.back().len) {
      merged.back().len = std::max(merged.back().len, s.pos + s.len - merged.back().pos);
    } else {
      merged.push_back(s);
    }
  }
  return merged;
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
