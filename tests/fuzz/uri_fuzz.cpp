// libFuzzer target: node URIs, node_options::parse.
//
// Any input either parses or throws config_error (anything else escaping is
// a finding). A parsed node is usable as given: a TCP host with a port in
// 1..65535 whose address() parses back to it, or an absolute unix socket
// path the transport can pass as a C string; db >= 0. An error message is
// printable and whole.
//
// No message shows a secret the input carried (issue 26): a password in the
// user info, user info that may be a password (no ':', or an empty password
// after it), or the value of a parameter clients read a password from, its
// name in any case and percent-encoded. The messages checked are the
// parser's error, and for a URI it accepts, address() (which results, logs
// and describe() show; not for a unix socket, whose path is shown whole)
// and check_node_options' error. Two checks:
// - the same input with every letter and digit of its secrets changed
//   (within its class, so the parser takes the same path) must give the
//   same messages: a message that changes shows some of a secret, raw,
//   decoded or recased;
// - a secret made of characters no message has of its own (say "!~#!")
//   must not be in them, as written or percent-decoded.

#include "fuzz_check.hpp"
#include "redlock/options_check.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

using redsync::config_error;
using redsync::node_options;
using redsync::fuzz::check;

void check_parsed(const node_options& n) {
  check(n.db >= 0, "db is negative");
  // TLS settings come only with rediss://, and reach OpenSSL as C strings.
  for (const std::string* s :
       {&n.tls.ca_file, &n.tls.ca_dir, &n.tls.cert_file, &n.tls.key_file, &n.tls.server_name}) {
    check(n.tls.enabled || s->empty(), "a TLS setting without TLS");
    check(s->find('\0') == std::string::npos, "a TLS setting contains a NUL byte");
  }
  check(n.tls.enabled || !n.tls.insecure_skip_verify, "insecure without TLS");
  check(!n.tls.enabled || n.unix_path.empty(), "TLS over a unix socket");
  if (!n.unix_path.empty()) {
    check(n.unix_path.front() == '/', "unix socket path is not absolute");
    check(n.unix_path.find('\0') == std::string::npos, "unix socket path contains a NUL byte");
    return;
  }
  check(!n.host.empty(), "neither a host nor a unix socket path");
  check(n.port >= 1 && n.port <= 65535, "port out of range");
  try {
    const node_options again = node_options::parse("redis://" + n.address());
    check(again.host == n.host && again.port == n.port, "address() parses back to another host or port");
  } catch (const config_error&) {
    check(false, "address() does not parse back");
  }
}

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (lower(s[i]) != prefix[i]) return false;
  return true;
}

struct span {
  std::size_t pos;
  std::size_t len;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_triplet(std::string_view s, std::size_t i) {
  return s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0;
}

std::string decoded(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (is_triplet(s, i)) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// If `uri` at `pos` spells `name` then '=', in any case and with any of
// them percent-encoded, where the value starts; else npos.
std::size_t value_after(std::string_view uri, std::size_t pos, std::string_view name) {
  std::string want(name);
  want += '=';
  for (const char c : want) {
    if (pos >= uri.size()) return std::string_view::npos;
    char got = uri[pos];
    if (is_triplet(uri, pos)) {
      got = static_cast<char>(hex_value(uri[pos + 1]) * 16 + hex_value(uri[pos + 2]));
      pos += 3;
    } else {
      ++pos;
    }
    if (lower(got) != c) return std::string_view::npos;
  }
  return pos;
}

// Where a URI carries secrets, read the way a user may mean them: the user
// info (for redis:// and rediss:// it ends at the last '@'; for another
// scheme at the last '@' before the path; without "://", unless unix:, at
// the last '@') after its first ':' if a password follows, else the user
// name (it may be the password); and after the user info, the value of
// every parameter named as clients name a password, up to the next '&'.
std::vector<span> secrets(std::string_view uri) {
  std::vector<span> out;
  std::size_t authority = std::string_view::npos;
  std::size_t at = std::string_view::npos;
  if (const std::size_t scheme_end = uri.find("://"); scheme_end != std::string_view::npos) {
    authority = scheme_end + 3;
    at = starts_with_nocase(uri, "redis://") || starts_with_nocase(uri, "rediss://")
             ? uri.rfind('@')
             : uri.substr(0, uri.find('/', authority)).rfind('@');
  } else if (!starts_with_nocase(uri, "unix:")) {
    authority = 0;
    at = uri.rfind('@');
  }
  std::size_t from = 0;
  if (at != std::string_view::npos && at >= authority) {
    from = at + 1;
    const std::string_view info = uri.substr(authority, at - authority);
    const std::size_t colon = info.find(':');
    if (colon != std::string_view::npos && colon + 1 < info.size()) {
      out.push_back({authority + colon + 1, info.size() - colon - 1});
    } else if (colon != 0 && !info.empty()) {
      out.push_back({authority, std::min(colon, info.size())});
    }
  }
  // The parser's query starts at the first '?': a "password=" before it is
  // part of a path, and its value (which the redaction masks up to the next
  // '&') cannot reach past that '?' into the query the parser reads.
  const std::size_t query = uri.find('?', from);
  for (std::size_t p = from; p < uri.size(); ++p) {
    for (const std::string_view name : {"password", "passwd", "pass", "pwd", "auth", "secret", "token"}) {
      const std::size_t value = value_after(uri, p, name);
      if (value == std::string_view::npos) continue;
      std::size_t end = uri.find('&', value);
      if (end == std::string_view::npos) end = uri.size();
      if (query != std::string_view::npos && value <= query) end = std::min(end, query);
      out.push_back({value, end - value});
    }
  }
  return out;
}

// `uri` with every letter and digit of its secrets changed to another of
// the same kind (a hex digit stays one, a letter keeps its case), except in
// valid %XX sequences (whose decoded bytes the parser checks, e.g. for NUL).
std::string with_other_secrets(std::string_view uri, const std::vector<span>& spans) {
  std::string out(uri);
  std::vector<bool> secret(uri.size(), false);
  for (const span s : spans)
    for (std::size_t i = s.pos; i < s.pos + s.len; ++i) secret[i] = true;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (is_triplet(uri, i)) {
      i += 2;
      continue;
    }
    if (!secret[i]) continue;
    const auto rotate = [&](char first, char last) {
      if (out[i] >= first && out[i] <= last) {
        out[i] = out[i] == last ? first : static_cast<char>(out[i] + 1);
        return true;
      }
      return false;
    };
    rotate('0', '9') || rotate('a', 'f') || rotate('A', 'F') || rotate('g', 'z') || rotate('G', 'Z');
  }
  return out;
}

// Whether `c` can only reach a message from the URI's own text: not a
// character of the messages' fixed words, of a masked "***" or of a control
// character shown as \xNN, and not a control character itself.
bool distinctive(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u == 0x7f) return false;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return false;
  return std::string_view(" \"():/.,[]'-@*_=\\").find(c) == std::string_view::npos;
}

// what() is a C string: a NUL in the message would cut it short, and
// other control characters garble logs and terminals.
void check_printable(std::string_view message) {
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    check(u >= 0x20 && u != 0x7f, "an error message holds a control character");
  }
  check(message.find("\": ") != std::string_view::npos, "an error message is cut short");
}

void check_not_shown(std::string_view uri, const std::vector<span>& spans, std::string_view message) {
  for (const span s : spans) {
    const std::string_view raw = uri.substr(s.pos, s.len);
    for (const std::string& secret : {std::string(raw), decoded(raw)}) {
      // Only a secret made of distinctive characters (say "!~#!") can be
      // told apart from the words and quotes around the parts a message
      // shows; the other check covers the rest.
      if (secret.size() < 2) continue;
      bool all_distinctive = true;
      for (char c : secret) all_distinctive = all_distinctive && distinctive(c);
      if (!all_distinctive) continue;
      // Nor when the same text is also elsewhere in the URI.
      std::string rest(uri.substr(0, s.pos));
      rest += uri.substr(s.pos + s.len);
      if (rest.find(secret) != std::string::npos) continue;
      check(message.find(secret) == std::string_view::npos, "a message shows a secret");
    }
  }
}

// Everything parsing `uri` makes the library say: the parser's error, or
// for a URI it accepts, the node's address() and check_node_options' error.
struct said {
  bool parsed = false;
  std::string text;
};

said messages(std::string_view uri) {
  said out;
  node_options n;
  try {
    n = node_options::parse(uri);
  } catch (const config_error& e) {
    out.text = e.what();
    return out;
  }
  out.parsed = true;
  check_parsed(n);
  // A unix socket path is a file path, shown whole (README), even when it
  // looks like "x://user:pw@host" (the parser's messages mask that).
  if (n.unix_path.empty()) out.text = n.address();
  try {
    redsync::detail::check_node_options(n);
  } catch (const config_error& e) {
    out.text += '\n';
    out.text += e.what();
  }
  return out;
}

// Inputs where the parser rightly reads the letters of what looks like a
// secret, so changing them changes its path: "rediss://h?ca=x@y" (an '@'
// in a parameter's value, inside what would be user info), and user info
// whose change makes the URI start with "unix:".
bool letters_steer_the_parser(std::string_view uri, std::string_view other) {
  if (starts_with_nocase(uri, "unix:") != starts_with_nocase(other, "unix:")) return true;
  // The same for a unix: path holding "scheme://user:pw@...": its query
  // starts at the first '?', inside what would be user info
  // ("unix:/p/redis://u:pw?db=1&x@h": the parser reads db=1).
  if (!starts_with_nocase(uri, "rediss://") && !starts_with_nocase(uri, "unix:")) return false;
  const std::size_t at = uri.rfind('@');
  const std::size_t q = uri.substr(0, at).find('?');
  return at != std::string_view::npos && q != std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view uri(reinterpret_cast<const char*>(data), size);
  const said first = messages(uri);
  if (!first.parsed) check_printable(first.text);
  const std::vector<span> spans = secrets(uri);
  check_not_shown(uri, spans, first.text);
  const std::string other = with_other_secrets(uri, spans);
  if (other == uri || letters_steer_the_parser(uri, other)) return 0;
  const said second = messages(other);
  check(first.parsed == second.parsed, "the letters of a secret decide whether a URI parses");
  check(first.text == second.text, "a message shows (some of) a secret");
  return 0;
}
