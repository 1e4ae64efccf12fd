// libFuzzer target: node URIs, node_options::parse.
//
// Any input either parses or throws config_error (anything else escaping is
// a finding). A parsed node is usable as given: a TCP host with a port in
// 1..65535 whose address() parses back to it, or an absolute unix socket
// path the transport can pass as a C string; db >= 0. An error message is
// printable and whole, and never shows a password: neither the one in the
// user info nor a "password=" query value.

#include "fuzz_check.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

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

// Where a URI carries passwords, read the way a user means them: in the user
// info after the first ':' (for redis:// the user info ends at the last '@';
// otherwise at the last '@' before the path), and in "password=" values of
// the query after it (up to the next '&').
std::vector<span> secrets(std::string_view uri) {
  std::vector<span> out;
  std::size_t query_from = 0;
  if (const std::size_t scheme_end = uri.find("://"); scheme_end != std::string_view::npos) {
    const std::size_t authority = scheme_end + 3;
    const std::size_t at = starts_with_nocase(uri, "redis://") || starts_with_nocase(uri, "rediss://")
                               ? uri.rfind('@')
                               : uri.substr(0, uri.find('/', authority)).rfind('@');
    if (at != std::string_view::npos && at >= authority) {
      query_from = at + 1;
      const std::size_t colon = uri.find(':', authority);
      if (colon != std::string_view::npos && colon < at) out.push_back({colon + 1, at - colon - 1});
    }
  }
  if (const std::size_t q = uri.find('?', query_from); q != std::string_view::npos) {
    for (std::size_t p = uri.find("password=", q); p != std::string_view::npos;
         p = uri.find("password=", p + 1)) {
      const std::size_t value = p + 9;
      const std::size_t amp = uri.find('&', value);
      out.push_back({value, (amp == std::string_view::npos ? uri.size() : amp) - value});
    }
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

void check_redacted(std::string_view uri, std::string_view message) {
  for (const span s : secrets(uri)) {
    const std::string_view secret = uri.substr(s.pos, s.len);
    // Only a secret made of distinctive characters (say "!~#!") can be told
    // apart from the words and quotes around the parts a message shows.
    if (secret.size() < 2) continue;
    bool all_distinctive = true;
    for (char c : secret) all_distinctive = all_distinctive && distinctive(c);
    if (!all_distinctive) continue;
    // Nor when the same text is also elsewhere in the URI.
    std::string rest(uri.substr(0, s.pos));
    rest += uri.substr(s.pos + s.len);
    if (rest.find(secret) != std::string::npos) continue;
    check(message.find(secret) == std::string_view::npos, "an error message shows a password");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view uri(reinterpret_cast<const char*>(data), size);
  node_options parsed;
  try {
    parsed = node_options::parse(uri);
  } catch (const config_error& e) {
    check_printable(e.what());
    check_redacted(uri, e.what());
    return 0;
  }
  check_parsed(parsed);
  return 0;
}
