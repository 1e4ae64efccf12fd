// The node list of a command: --nodes, REDSYNC_NODES or the testbed's
// ports; split and checked by the library (redsync::parse_members, which
// keeps cluster members whole), the --tls-* options applied to every
// rediss:// URI.

#include "node_list.hpp"

#include <redsync/error.hpp>
#include <redsync/members.hpp>
#include <redsync/options.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

namespace redsync::cli {

namespace {

// The scheme of `uri` in lower case, or "" when it has none.
std::string lower_scheme(std::string_view uri) {
  const std::size_t end = uri.find("://");
  if (end == std::string_view::npos) return {};
  std::string scheme(uri.substr(0, end));
  for (char& c : scheme) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  return scheme;
}

}  // namespace

bool is_cluster_member_uri(std::string_view uri) {
  const std::string scheme = lower_scheme(uri);
  return scheme == "redis+cluster" || scheme == "rediss+cluster";
}

// The library splits and checks the list (redsync::parse_members, the one
// home of the rule); its messages never show a password.
std::vector<std::string> parse_nodes(std::string_view what, std::string_view text) {
  try {
    return parse_members(text);
  } catch (const config_error& e) {
    throw usage_error(fmt::format("{}: {}", what, e.what()));
  }
}

namespace {

// Percent-encodes what a query value may not hold as is: '&', '#', '%',
// '@' (the URI parser ends the user info at the last '@'), ',' (it
// separates URIs in --nodes and REDSYNC_NODES), and anything not printable.
std::string query_encode(std::string_view value) {
  std::string out;
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '&' || c == '#' || c == '%' || c == '@' || c == ',' || c == '?' ||
        c == '+' || c == '=') {
      out += fmt::format("%{:02X}", u);
    } else {
      out += c;
    }
  }
  return out;
}

// rediss:// or rediss+cluster:// (a cluster member's seeds share its TLS
// parameters).
bool is_rediss(std::string_view uri) {
  const std::string scheme = lower_scheme(uri);
  return scheme == "rediss" || scheme == "rediss+cluster";
}

// Where the query of `uri` starts (its '?', after the user info), or npos.
std::size_t query_start(std::string_view uri) {
  const std::size_t at = uri.rfind('@');
  return uri.find('?', at == std::string_view::npos ? 0 : at);
}

bool sets_any_query(std::string_view uri) {
  return query_start(uri) != std::string_view::npos;
}

// Whether the query of `uri` sets `param`.
bool sets_param(std::string_view uri, std::string_view param) {
  const std::size_t q = query_start(uri);
  if (q == std::string_view::npos) return false;
  std::string_view query = uri.substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    if (item.substr(0, item.find('=')) == param) return true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

// ping and status do not construct a Redsync (which reads the files): say
// here, for every command alike, which file cannot be read.
void check_tls_files(const node_options& node) {
  const std::pair<const char*, const std::string*> files[] = {{"--tls-ca (ca=)", &node.tls.ca_file},
                                                              {"--tls-cert (cert=)", &node.tls.cert_file},
                                                              {"--tls-key (key=)", &node.tls.key_file}};
  for (const auto& [option, path] : files) {
    if (path->empty()) continue;
    if (std::FILE* f = std::fopen(path->c_str(), "r")) {
      std::fclose(f);
      continue;
    }
    throw usage_error(fmt::format("{}: \"{}\" cannot be read: {}", option, *path, std::strerror(errno)));
  }
}

bool is_path_param(std::string_view param) {
  return param == "ca" || param == "ca_dir" || param == "cert" || param == "key";
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

}  // namespace

std::vector<std::string> apply_tls_options(std::vector<std::string> uris, const parsed_args& args) {
  struct flag {
    std::string_view option;
    std::string_view param;
  };
  constexpr flag flags[] = {
      {"tls-ca", "ca"},   {"tls-ca-dir", "ca_dir"},           {"tls-cert", "cert"},
      {"tls-key", "key"}, {"tls-server-name", "server_name"}, {"tls-insecure", "insecure"}};
  std::vector<std::pair<std::string_view, std::string>> given;
  std::vector<std::pair<const flag*, std::string>> raw;  // the values, for conflicts
  for (const flag& f : flags) {
    const std::string* v = args.last(f.option);
    if (v == nullptr) continue;
    if (f.param != "insecure" && v->empty()) throw usage_error(fmt::format("--{}: empty value", f.option));
    // Paths are made absolute: the URIs reach the command through
    // REDSYNC_NODES, and the command may run elsewhere.
    const std::string value = f.param == "insecure"    ? std::string("true")
                              : is_path_param(f.param) ? absolute_path(*v)
                                                       : *v;
    given.emplace_back(f.param, query_encode(value));
    raw.emplace_back(&f, value);
  }
  if (given.empty()) return uris;
  bool any_tls = false;
  for (auto& uri : uris) {
    if (!is_rediss(uri)) continue;
    any_tls = true;
    // A URI that already sets a parameter (one inherited through
    // REDSYNC_NODES from an outer redsync, say) keeps it; an option that
    // says otherwise is an error, never silently ignored.
    const node_options as_given = member_options::parse(uri).seeds.front();
    for (const auto& [f, value] : raw) {
      if (!sets_param(uri, f->param)) continue;
      const tls_options& t = as_given.tls;
      const std::string in_uri = f->param == "ca"            ? t.ca_file
                                 : f->param == "ca_dir"      ? t.ca_dir
                                 : f->param == "cert"        ? t.cert_file
                                 : f->param == "key"         ? t.key_file
                                 : f->param == "server_name" ? t.server_name
                                 : t.insecure_skip_verify    ? "true"
                                                             : "false";
      const bool same = is_path_param(f->param) ? absolute_path(in_uri) == value : in_uri == value;
      if (!same)
        throw usage_error(fmt::format("--{} \"{}\" conflicts with {}={} in the URI of node {}", f->option,
                                      value, f->param, in_uri, as_given.address()));
    }
    for (const auto& [param, value] : given) {
      if (sets_param(uri, param)) continue;
      uri += fmt::format("{}{}={}", sets_any_query(uri) ? "&" : "?", param, value);
    }
    try {
      check_tls_files(member_options::parse(uri).seeds.front());
    } catch (const config_error& e) {
      throw usage_error(e.what());
    }
  }
  if (!any_tls) {
    for (const flag& f : flags) {
      if (args.has(f.option)) {
        throw usage_error(
            fmt::format("--{}: no node uses rediss:// (the TLS options apply to rediss:// nodes)", f.option));
      }
    }
  }
  return uris;
}

std::vector<std::string> resolve_nodes(const parsed_args& args) {
  std::vector<std::string> uris;
  if (const std::string* v = args.last("nodes")) {
    uris = parse_nodes("--nodes", *v);
  } else if (const char* env = std::getenv("REDSYNC_NODES"); env != nullptr && *env != '\0') {
    uris = parse_nodes("REDSYNC_NODES", env);
  } else {
    // The testbed's nodes, found as scripts/testbed finds them.
    const auto from_env = [](const char* name, int fallback, int max) {
      const char* v = std::getenv(name);
      return v == nullptr || *v == '\0' ? fallback : parse_int(name, v, 1, max);
    };
    const int first = from_env("REDSYNC_TESTBED_PORT", 7001, 65535);
    const int count = from_env("REDSYNC_TESTBED_NODES", 5, 65535 - first + 1);
    for (int port = first; port < first + count; ++port)
      uris.push_back(fmt::format("redis://127.0.0.1:{}", port));
  }
  return apply_tls_options(std::move(uris), args);
}

}  // namespace redsync::cli
