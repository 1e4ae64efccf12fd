// Parsing node URIs into node_options, one step per part of the URI (scheme,
// credentials, host and port or unix path, db, TLS parameters); errors show
// the URI through redacted_uri, never a password or user info that may be one.

#include "util/node_uri.hpp"

#include "util/ascii.hpp"
#include "util/redacted_uri.hpp"

#include <redsync/error.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace redsync::detail {
namespace {

constexpr std::string_view redis_prefix = "redis://";
constexpr std::string_view rediss_prefix = "rediss://";
constexpr std::string_view unix_prefix = "unix:";

// ---- characters -------------------------------------------------------------

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// ---- the parser -------------------------------------------------------------

class node_uri_parser {
 public:
  explicit node_uri_parser(std::string_view uri)
      : uri_(uri),
        redacted_(uri, starts_with_nocase(uri, redis_prefix) || starts_with_nocase(uri, rediss_prefix)) {}

  node_options parse() {
    if (uri_.empty()) fail("the URI is empty");
    if (starts_with_nocase(uri_, redis_prefix)) {
      parse_redis(uri_.substr(redis_prefix.size()), false);
    } else if (starts_with_nocase(uri_, rediss_prefix)) {
      node_.tls.enabled = true;
      parse_redis(uri_.substr(rediss_prefix.size()), true);
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

  // `part` (a view into the URI) as error messages may show it.
  std::string shown(std::string_view part) const { return redacted_.shown(part); }

  // ---- scheme

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
      std::string lower(scheme);
      for (char& c : lower) c = ascii_lower(c);
      if (lower == "redis+cluster" || lower == "rediss+cluster") {
        fail("\"{}\" names a cluster member, which is not a single node (docs/cluster.md)", scheme);
      }
      fail("unknown scheme \"{}\" (expected redis://, rediss:// or unix://)", scheme);
    }
    // Typically "localhost:6379" or "10.0.0.1".
    fail("missing scheme (expected redis://host:port or unix:///path)");
  }

  // ---- redis://[user[:password]@]host[:port][/db]
  // ---- rediss://[user[:password]@]host[:port][/db][?param=value&...]

  void parse_redis(std::string_view rest, bool tls) {
    // The user info ends at the last '@', so a password may contain raw
    // '/', '?', '#' or ':' even when it should have been percent-encoded
    // (and an '@' in a TLS parameter's value must be: %40).
    if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
      // "rediss://h:6380?ca=/etc/ca@v2.pem": the '@' belongs to a parameter
      // value, and reading "h:6380?ca=/etc/ca" as user info would drop the
      // parameter silently. A '?' then a parameter name means just that.
      if (const std::size_t q = rest.substr(0, at).find('?'); tls && q != std::string_view::npos) {
        const std::string_view after = rest.substr(q + 1, at - q - 1);
        for (const std::string_view name : {"ca=", "ca_dir=", "cert=", "key=", "server_name=", "insecure="}) {
          if (after.starts_with(name))
            fail("an '@' in the value of the parameter \"{}\" must be written %40",
                 name.substr(0, name.size() - 1));
        }
      }
      parse_credentials(rest.substr(0, at));
      rest.remove_prefix(at + 1);
    }

    if (const std::size_t hash = rest.find('#'); hash != std::string_view::npos) {
      fail("unexpected \"{}\" ({} URIs take no fragment)", shown(rest.substr(hash)),
           tls ? "rediss://" : "redis://");
    }
    if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
      if (!tls) fail("unexpected \"{}\" (redis:// URIs take no query or fragment)", shown(rest.substr(q)));
      parse_tls_query(rest.substr(q + 1));
      rest = rest.substr(0, q);
    }

    const std::size_t slash = rest.find('/');
    parse_host_port(rest.substr(0, slash));
    if (slash != std::string_view::npos) parse_db_path(rest.substr(slash + 1));
  }

  // user[:password], the user info before the '@'.
  void parse_credentials(std::string_view info) {
    const std::size_t colon = info.find(':');
    // Clients disagree on what "redis://word@host" means (a user, or a
    // password as in Lettuce), and "word:@host" is often the same mistake:
    // a user name is shown only when a password follows it (redacted_uri
    // masks it likewise).
    const bool user_is_shown = colon != std::string_view::npos && colon + 1 < info.size();
    node_.username = decode(info.substr(0, colon), "user name", user_is_shown);
    if (colon != std::string_view::npos) {
      node_.password = decode(info.substr(colon + 1), "password", false);
    } else if (!node_.username.empty()) {
      // A user alone cannot AUTH anyway.
      fail(
          "user info without a ':' (not shown: it may be a password; write redis://:password@host for "
          "a password alone, redis://user:password@host for both)");
    }
  }

  // host[:port] or [IPv6 address][:port].
  void parse_host_port(std::string_view hp) {
    const std::optional<std::string_view> port =
        !hp.empty() && hp.front() == '[' ? parse_ipv6_host(hp) : parse_host_name(hp);
    if (port) parse_port(*port);
  }

  // "[address]" with an optional ":port" after it; returns the port text if
  // there is a ':'.
  std::optional<std::string_view> parse_ipv6_host(std::string_view hp) {
    const std::size_t close = hp.find(']');
    if (close == std::string_view::npos) fail("IPv6 address \"{}\" lacks a closing ']'", shown(hp));
    const std::string_view host = hp.substr(1, close - 1);
    if (host.empty()) fail("empty host");
    for (char c : host) {
      if (!(is_digit(c) || (ascii_lower(c) >= 'a' && ascii_lower(c) <= 'f') || c == ':' || c == '.')) {
        fail("IPv6 address \"{}\" contains '{}'", shown(host), printable({&c, 1}));
      }
    }
    node_.host = std::string(host);
    const std::string_view after = hp.substr(close + 1);
    if (after.empty()) return std::nullopt;
    if (after.front() != ':') fail("unexpected \"{}\" after IPv6 address", shown(after));
    return after.substr(1);
  }

  // A host name or IPv4 address with an optional ":port" after it; returns
  // the port text if there is a ':'.
  std::optional<std::string_view> parse_host_name(std::string_view hp) {
    const std::size_t colon = hp.find(':');
    const std::string_view host = hp.substr(0, colon);
    if (host.empty()) fail("empty host");
    for (char c : host) {
      if (!(is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_')) {
        fail("host \"{}\" contains '{}'", shown(host), printable({&c, 1}));
      }
    }
    node_.host = std::string(host);
    if (colon == std::string_view::npos) return std::nullopt;
    const std::string_view port = hp.substr(colon + 1);
    if (port.find(':') != std::string_view::npos) {
      fail(
          "too many ':' in \"{}\" (an IPv6 address goes in brackets: "
          "[::1]:6379)",
          shown(hp));
    }
    return port;
  }

  // The text after the ':'.
  void parse_port(std::string_view port) {
    if (port.empty()) fail("port is empty after ':'");
    bool digits = true;
    for (char c : port) digits = digits && is_digit(c);
    if (!digits) fail("port \"{}\" is not a number", shown(port));
    node_.port = parse_number(port, "port", 1, 65535);
  }

  // The path after the host: the db number, or nothing.
  void parse_db_path(std::string_view path) {
    if (path.empty()) return;  // "redis://host/" is db 0
    node_.db = parse_number(path, "db", 0, 2147483647);
  }

  // ---- unix:///path[?db=N] or unix:/path[?db=N]

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

  // The query after '?': db=N, once; nothing else.
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

  // ---- rediss:// query: ca, ca_dir, cert, key, server_name, insecure

  void parse_tls_query(std::string_view query) {
    struct param {
      std::string_view name;
      std::string* target;  // null for insecure
      bool seen = false;
    };
    tls_options& t = node_.tls;
    param params[] = {{"ca", &t.ca_file},   {"ca_dir", &t.ca_dir},           {"cert", &t.cert_file},
                      {"key", &t.key_file}, {"server_name", &t.server_name}, {"insecure", nullptr}};
    if (query.empty()) fail("empty query after '?'");
    for (;;) {
      const std::size_t amp = query.find('&');
      const std::string_view item = query.substr(0, amp);
      const std::size_t eq = item.find('=');
      const std::string_view key = item.substr(0, eq);
      if (key.empty()) fail("empty query parameter in \"{}\"", shown(query.substr(0, amp)));
      param* p = nullptr;
      for (auto& candidate : params) p = candidate.name == key ? &candidate : p;
      if (p == nullptr) {
        fail("unknown query parameter \"{}\" (rediss:// takes ca, ca_dir, cert, key, server_name, insecure)",
             shown(key));
      }
      if (p->seen) fail("query parameter {} given twice", key);
      p->seen = true;
      if (eq == std::string_view::npos || eq + 1 == item.size()) fail("query parameter {} has no value", key);
      const std::string value = decode(item.substr(eq + 1), key, true);
      // Paths and names reach OpenSSL as C strings: a NUL would cut them short.
      if (value.find('\0') != std::string::npos) fail("query parameter {} contains a NUL byte", key);
      if (p->target != nullptr) {
        *p->target = value;
      } else if (value == "true" || value == "1") {
        t.insecure_skip_verify = true;
      } else if (value != "false" && value != "0") {
        // The value as written, through the redaction: it is the URI's own
        // text, which may hold a password elsewhere.
        fail("query parameter insecure = \"{}\": expected true or false", shown(item.substr(eq + 1)));
      }
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
      if (query.empty()) fail("empty query parameter after the last '&'");
    }
  }

  // ---- pieces shared by the steps

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
      const int hi = i + 1 < s.size() ? hex_digit_value(s[i + 1]) : -1;
      const int lo = i + 2 < s.size() ? hex_digit_value(s[i + 2]) : -1;
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

  std::string_view uri_;
  redacted_uri redacted_;
  node_options node_;
};

}  // namespace

node_options parse_node_uri(std::string_view uri) {
  return node_uri_parser(uri).parse();
}

}  // namespace redsync::detail
