// node_options::parse and node_options::address: node URIs of the forms
//   redis://[user[:password]@]host[:port][/db]
//   unix:///path/to/redis.sock[?db=N]   (also unix:/path, as address() prints)
// Errors name the URI with any password replaced by "***", since config
// errors end up in logs.

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace redsync {
namespace {

constexpr std::string_view redis_prefix = "redis://";
constexpr std::string_view unix_prefix = "unix:";

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

char to_lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (to_lower(s[i]) != prefix[i]) return false;
  }
  return true;
}

// A part of a URI that must not be shown: [pos, pos + len).
struct span {
  std::size_t pos = 0;
  std::size_t len = 0;
};

// Where `uri` carries passwords: after the first ':' of the user info (for
// redis:// the user info ends at the last '@', see parse_redis; for other
// schemes at an '@' before the path), and in the value of every
// "password=" query parameter after it, which no scheme here accepts but
// people write (redis-py reads redis://host?password=...). In order.
std::vector<span> find_secrets(std::string_view uri) {
  std::vector<span> out;
  std::size_t query_from = 0;
  if (const std::size_t scheme_end = uri.find("://"); scheme_end != std::string_view::npos) {
    const std::size_t authority = scheme_end + 3;
    const bool redis = starts_with_nocase(uri, redis_prefix);
    const std::size_t at = redis ? uri.rfind('@') : uri.substr(0, uri.find('/', authority)).rfind('@');
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

class uri_parser {
 public:
  explicit uri_parser(std::string_view uri) : uri_(uri), secrets_(find_secrets(uri)) {}

  node_options parse() {
    if (uri_.empty()) fail("the URI is empty");
    if (starts_with_nocase(uri_, redis_prefix)) {
      parse_redis(uri_.substr(redis_prefix.size()));
    } else if (starts_with_nocase(uri_, unix_prefix)) {
      parse_unix(uri_.substr(unix_prefix.size()));
    } else {
      reject_scheme();
    }
    return node_;
  }

 private:
  // Error messages show parts of the URI through shown(), since config
  // errors end up in logs.
  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw config_error(fmt::format("invalid node URI \"{}\": {}", shown(uri_),
                                   fmt::format(format, std::forward<Args>(args)...)));
  }

  // `part` (a view into the URI) as it may be shown: every password in it,
  // or the piece of one it holds, becomes "***", and control characters
  // become \xNN (a NUL would cut what() short).
  std::string shown(std::string_view part) const {
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

  // Decoded text as it may be shown.
  static std::string printable(std::string_view text) {
    std::string out;
    append_printable(out, text);
    return out;
  }

  static void append_printable(std::string& out, std::string_view text) {
    for (const char c : text) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        out += fmt::format("\\x{:02x}", u);
      } else {
        out += c;
      }
    }
  }

  [[noreturn]] void reject_scheme() const {
    // A scheme is letters, digits, '+', '-', '.' starting with a letter
    // (RFC 3986), followed here by "://".
    std::size_t end = 0;
    if (is_alpha(uri_[0])) {
      end = 1;
      while (end < uri_.size() && (is_alpha(uri_[end]) || is_digit(uri_[end]) || uri_[end] == '+' ||
                                   uri_[end] == '-' || uri_[end] == '.')) {
        ++end;
      }
    }
    if (end > 0 && uri_.substr(end, 3) == "://") {
      const std::string_view scheme = uri_.substr(0, end);
      if (starts_with_nocase(scheme, "rediss") && scheme.size() == 6) {
        fail("TLS (rediss://) is not supported");
      }
      fail("unknown scheme \"{}\" (expected redis:// or unix://)", scheme);
    }
    // Typically "localhost:6379" or "10.0.0.1".
    fail("missing scheme (expected redis://host:port or unix:///path)");
  }

  // Percent-decodes `s`; `what` names the part for error messages, and
  // `show` says whether the text may appear in them (not for passwords).
  std::string decode(std::string_view s, std::string_view what, bool show) const {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '%') {
        out += s[i];
        continue;
      }
      const int hi = i + 1 < s.size() ? hex_value(s[i + 1]) : -1;
      const int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        if (show) {
          fail("bad percent-encoding \"{}\" in {}", shown(s.substr(i, 3)), what);
        }
        fail("bad percent-encoding in {}", what);
      }
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    return out;
  }

  static int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // A non-negative decimal in [min, max]; `what` names it for messages.
  int parse_number(std::string_view s, std::string_view what, long long min, long long max) const {
    bool digits = !s.empty();
    for (char c : s) digits = digits && is_digit(c);
    if (!digits) fail("{} \"{}\" is not a non-negative integer", what, shown(s));
    long long value = 0;
    const std::from_chars_result r = std::from_chars(s.data(), s.data() + s.size(), value);
    if (r.ec == std::errc::result_out_of_range || value < min || value > max) {
      fail("{} {} is out of range {}..{}", what, shown(s), min, max);
    }
    return static_cast<int>(value);
  }

  void parse_redis(std::string_view rest) {
    // The user info ends at the last '@', so a password may contain raw
    // '/', '?', '#' or ':' even when it should have been percent-encoded.
    if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
      parse_user_info(rest.substr(0, at));
      rest.remove_prefix(at + 1);
    }

    if (const std::size_t q = rest.find_first_of("?#"); q != std::string_view::npos) {
      fail("unexpected \"{}\" (redis:// URIs take no query or fragment)", shown(rest.substr(q)));
    }

    const std::size_t slash = rest.find('/');
    parse_host_port(rest.substr(0, slash));
    if (slash != std::string_view::npos) parse_db_path(rest.substr(slash + 1));
  }

  void parse_user_info(std::string_view info) {
    const std::size_t colon = info.find(':');
    node_.username = decode(info.substr(0, colon), "user name", true);
    if (colon != std::string_view::npos) {
      node_.password = decode(info.substr(colon + 1), "password", false);
    } else if (!node_.username.empty()) {
      // Clients disagree on what "redis://word@host" means (a user, or a
      // password as in Lettuce); a user alone cannot AUTH anyway.
      fail(
          "user name \"{}\" has no password (for a password alone write "
          "redis://:password@host)",
          printable(node_.username));
    }
  }

  void parse_host_port(std::string_view hp) {
    std::string_view port;
    bool has_port = false;
    if (!hp.empty() && hp.front() == '[') {
      const std::size_t close = hp.find(']');
      if (close == std::string_view::npos) fail("IPv6 address \"{}\" lacks a closing ']'", shown(hp));
      const std::string_view host = hp.substr(1, close - 1);
      if (host.empty()) fail("empty host");
      for (char c : host) {
        if (!(is_digit(c) || (to_lower(c) >= 'a' && to_lower(c) <= 'f') || c == ':' || c == '.')) {
          fail("IPv6 address \"{}\" contains '{}'", shown(host), printable({&c, 1}));
        }
      }
      node_.host = std::string(host);
      const std::string_view after = hp.substr(close + 1);
      if (!after.empty()) {
        if (after.front() != ':') fail("unexpected \"{}\" after IPv6 address", shown(after));
        has_port = true;
        port = after.substr(1);
      }
    } else {
      const std::size_t colon = hp.find(':');
      const std::string_view host = hp.substr(0, colon);
      if (host.empty()) fail("empty host");
      for (char c : host) {
        if (!(is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_')) {
          fail("host \"{}\" contains '{}'", shown(host), printable({&c, 1}));
        }
      }
      node_.host = std::string(host);
      if (colon != std::string_view::npos) {
        has_port = true;
        port = hp.substr(colon + 1);
        if (port.find(':') != std::string_view::npos) {
          fail(
              "too many ':' in \"{}\" (an IPv6 address goes in brackets: "
              "[::1]:6379)",
              shown(hp));
        }
      }
    }
    if (has_port) {
      if (port.empty()) fail("port is empty after ':'");
      bool digits = true;
      for (char c : port) digits = digits && is_digit(c);
      if (!digits) fail("port \"{}\" is not a number", shown(port));
      node_.port = parse_number(port, "port", 1, 65535);
    }
  }

  void parse_db_path(std::string_view path) {
    if (path.empty()) return;  // "redis://host/" is db 0
    node_.db = parse_number(path, "db", 0, 2147483647);
  }

  void parse_unix(std::string_view rest) {
    if (rest.substr(0, 2) == "//") {
      rest.remove_prefix(2);
      if (!rest.empty() && rest.front() != '/') {
        const std::string_view authority = rest.substr(0, rest.find('/'));
        fail(
            "unexpected \"{}\" before the path (write "
            "unix:///path/to/redis.sock)",
            authority.find('@') == std::string_view::npos ? shown(authority) : "user info");
      }
    }
    if (const std::size_t hash = rest.find('#'); hash != std::string_view::npos) {
      fail("unexpected \"{}\" (unix: URIs take no fragment)", shown(rest.substr(hash)));
    }
    const std::size_t q = rest.find('?');
    const std::string_view path = rest.substr(0, q);
    if (path.empty() || path == "/") fail("empty unix socket path");
    if (path.front() != '/') fail("unix socket path \"{}\" is not absolute", shown(path));
    node_.unix_path = decode(path, "unix socket path", true);
    // The transport passes the path on as a C string: a NUL (raw or %00)
    // would cut it short and reach another socket.
    if (node_.unix_path.find('\0') != std::string::npos) fail("unix socket path contains a NUL byte");
    node_.host.clear();
    if (q != std::string_view::npos) parse_unix_query(rest.substr(q + 1));
  }

  void parse_unix_query(std::string_view query) {
    bool seen_db = false;
    while (!query.empty()) {
      const std::size_t amp = query.find('&');
      const std::string_view param = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      const std::size_t eq = param.find('=');
      const std::string_view key = param.substr(0, eq);
      if (key != "db") {
        fail("unknown query parameter \"{}\" (only db is supported)", shown(key));
      }
      if (seen_db) fail("query parameter db given twice");
      seen_db = true;
      if (eq == std::string_view::npos) fail("query parameter db has no value");
      node_.db = parse_number(param.substr(eq + 1), "db", 0, 2147483647);
    }
  }

  std::string_view uri_;
  std::vector<span> secrets_;
  node_options node_;
};

}  // namespace

node_options node_options::parse(std::string_view uri) {
  return uri_parser(uri).parse();
}

std::string node_options::address() const {
  if (!unix_path.empty()) return "unix:" + unix_path;
  // A ':' in the host means IPv6, which needs brackets to keep the port apart.
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace redsync
