#include "tls_failure.hpp"

#include <fmt/format.h>

namespace redsync::cli {
namespace {

bool has(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

bool has_icase(std::string_view haystack, std::string_view needle) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i + needle.size() <= haystack.size(); ++i) {
    std::size_t j = 0;
    while (j < needle.size() && lower(haystack[i + j]) == lower(needle[j])) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

constexpr std::string_view speaks_tls_words = "the port speaks TLS";

}  // namespace

bool is_tls_refusal(std::string_view message) {
  return has(message, "certificate verify failed") || has(message, "requires a client certificate") ||
         has(message, speaks_tls_words);
}

std::string tls_hint(std::string_view message) {
  if (!has(message, "certificate verify failed")) return {};
  if (has(message, "hostname mismatch") || has(message, "IP address mismatch"))
    return "use --tls-server-name NAME with a name the servers' certificates hold";
  if (has(message, "has expired") || has(message, "not yet valid"))
    return "the server's certificate is outside its validity period: renew it (or check the clocks)";
  return "use --tls-ca FILE (or --tls-ca-dir DIR) with the CA that signed the servers' certificates";
}

std::string with_tls_hint(const std::string& message) {
  const std::string hint = tls_hint(message);
  return hint.empty() ? message : message + "; " + hint;
}

bool may_be_tls_port(std::string_view message) {
  return has_icase(message, "reset by peer") || has_icase(message, "closed the connection") ||
         has_icase(message, "connection lost") || has_icase(message, "protocol error") ||
         has_icase(message, "end of file") || has_icase(message, "eof");
}

std::string plaintext_to_tls(const node_options& node, std::string_view original) {
  return fmt::format("{}: use rediss://{}:{} (a plaintext redis:// connection got: {})", speaks_tls_words,
                     node.host.find(':') != std::string::npos ? "[" + node.host + "]" : node.host, node.port,
                     original);
}

}  // namespace redsync::cli
