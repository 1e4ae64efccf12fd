#include "args.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

namespace redsync::cli {
namespace {

const option_spec* find_long(std::span<const option_spec> specs, std::string_view name) {
  for (const auto& s : specs) {
    if (s.long_name == name) return &s;
  }
  return nullptr;
}

const option_spec* find_short(std::span<const option_spec> specs, char c) {
  for (const auto& s : specs) {
    if (s.short_name != 0 && s.short_name == c) return &s;
  }
  return nullptr;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// No duration on the command line needs more than a few days; the bound keeps
// the arithmetic below far from overflow.
constexpr std::int64_t max_duration_ms = std::int64_t{7} * 24 * 3600 * 1000;

}  // namespace

bool parsed_args::has(std::string_view name) const {
  return last(name) != nullptr;
}

int parsed_args::count(std::string_view name) const {
  int n = 0;
  for (const auto& option : options) n += option.first == name ? 1 : 0;
  return n;
}

const std::string* parsed_args::last(std::string_view name) const {
  const std::string* found = nullptr;
  for (const auto& [n, v] : options) {
    if (n == name) found = &v;
  }
  return found;
}

parsed_args parse_args(std::span<char* const> args, std::span<const option_spec> specs) {
  parsed_args out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--") {
      out.has_separator = true;
      out.after_separator.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      out.positionals.emplace_back(arg);
      continue;
    }
    // A value comes from "--name=VALUE", from the rest of a short-flag
    // cluster ("-cCMD"), or else from the next argument.
    const auto take_value = [&](const option_spec& spec, std::string_view rest, bool has_rest) {
      if (has_rest) {
        out.options.emplace_back(spec.long_name, std::string(rest));
      } else if (i + 1 < args.size()) {
        out.options.emplace_back(spec.long_name, std::string(args[++i]));
      } else {
        throw usage_error(fmt::format("--{}: missing value", spec.long_name));
      }
    };
    if (arg.starts_with("--")) {
      std::string_view name = arg.substr(2);
      std::string_view inline_value;
      bool has_inline = false;
      if (auto eq = name.find('='); eq != std::string_view::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_inline = true;
      }
      const option_spec* spec = find_long(specs, name);
      if (spec == nullptr) throw usage_error(fmt::format("unknown option \"{}\"", arg));
      if (spec->takes_value) {
        take_value(*spec, inline_value, has_inline);
      } else if (has_inline) {
        throw usage_error(fmt::format("--{}: takes no value", spec->long_name));
      } else {
        out.options.emplace_back(spec->long_name, std::string());
      }
      continue;
    }
    // Short flags, alone or combined as getopt(3) does: "-vv", "-qv", and a
    // flag that takes a value ends the cluster ("-qc CMD", "-cCMD").
    for (std::size_t k = 1; k < arg.size(); ++k) {
      const option_spec* spec = find_short(specs, arg[k]);
      if (spec == nullptr) {
        if (arg.size() == 2) throw usage_error(fmt::format("unknown option \"{}\"", arg));
        throw usage_error(fmt::format("unknown option \"-{}\" in \"{}\"", arg[k], arg));
      }
      if (spec->takes_value) {
        take_value(*spec, arg.substr(k + 1), k + 1 < arg.size());
        break;
      }
      out.options.emplace_back(spec->long_name, std::string());
    }
  }
  return out;
}

std::chrono::milliseconds parse_duration(std::string_view what, std::string_view text) {
  const auto invalid = [&](std::string_view why) {
    return usage_error(fmt::format("{}: invalid duration \"{}\"{}{} (use e.g. 5, 250ms, 8s, 1.5s, 2m, 10h)",
                                   what, text, why.empty() ? "" : ": ", why));
  };
  if (text == "0") return std::chrono::milliseconds{0};
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  const std::string_view whole = text.substr(0, i);
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(start, i - start);
    if (fraction.empty()) throw invalid("");
  }
  if (whole.empty() || whole.size() > 9 || fraction.size() > 9) throw invalid("");
  const std::string_view unit = text.substr(i);
  std::int64_t scale = 0;             // milliseconds per unit
  if (unit.empty() || unit == "s") {  // a bare number is seconds, as sleep(1) and timeout(1) read it
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else {
    throw invalid("");
  }
  std::int64_t w = 0;
  std::from_chars(whole.data(), whole.data() + whole.size(), w);
  // The fraction, as an exact rational f / 10^digits of one unit.
  std::int64_t f = 0;
  std::int64_t denom = 1;
  for (char c : fraction) {
    f = f * 10 + (c - '0');
    denom *= 10;
  }
  if ((f * scale) % denom != 0) throw invalid("not a whole number of milliseconds");
  const std::int64_t ms = w * scale + f * scale / denom;
  if (ms > max_duration_ms) throw invalid("too large");
  return std::chrono::milliseconds{ms};
}

int parse_int(std::string_view what, std::string_view text, int min, int max) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < min || v > max) {
    throw usage_error(
        fmt::format("{}: invalid number \"{}\" (expected an integer in [{}, {}])", what, text, min, max));
  }
  return v;
}

double parse_double(std::string_view what, std::string_view text) {
  const auto invalid = [&] { return usage_error(fmt::format("{}: invalid number \"{}\"", what, text)); };
  bool digits = false;
  bool dot = false;
  for (char c : text) {
    if (is_digit(c)) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      throw invalid();
    }
  }
  if (!digits || text.size() > 32) throw invalid();
  // strtod on a validated, NUL-terminated copy: std::from_chars for double
  // needs a newer libstdc++ than every compiler here ships.
  const std::string copy(text);
  return std::strtod(copy.c_str(), nullptr);
}

namespace {

// Whether `piece` (of a comma-separated list) starts like a node URI: a
// scheme, or the "unix:" of a short unix socket URI.
bool starts_like_uri(std::string_view piece) {
  const std::size_t scheme_end = piece.find("://");
  if (scheme_end != std::string_view::npos && piece.substr(0, scheme_end).find('@') == std::string_view::npos)
    return true;
  constexpr std::string_view unix_prefix = "unix:";
  if (piece.size() < unix_prefix.size()) return false;
  for (std::size_t i = 0; i < unix_prefix.size(); ++i) {
    const char c = piece[i] >= 'A' && piece[i] <= 'Z' ? static_cast<char>(piece[i] - 'A' + 'a') : piece[i];
    if (c != unix_prefix[i]) return false;
  }
  return true;
}

}  // namespace

bool is_cluster_member_uri(std::string_view uri) {
  std::string head(uri.substr(0, uri.find("://")));
  for (char& c : head) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  return uri.find("://") != std::string_view::npos && (head == "redis+cluster" || head == "rediss+cluster");
}

// Messages name a URI by its place in the list, never by the list's text:
// that holds the passwords of every node.
std::vector<std::string> parse_nodes(std::string_view what, std::string_view text) {
  std::vector<std::string_view> pieces;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    pieces.push_back(
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].empty())
      throw usage_error(fmt::format("{}: node URI {} of {} is empty", what, i + 1, pieces.size()));
    if (is_cluster_member_uri(pieces[i])) {
      // A cluster member's seeds are separated by commas too: the pieces
      // that do not start with a scheme continue it (docs/cluster.md). The
      // library checks it (its messages never show a password).
      std::string member(pieces[i]);
      while (i + 1 < pieces.size() && !pieces[i + 1].empty() && !starts_like_uri(pieces[i + 1]))
        member += "," + std::string(pieces[++i]);
      uris.push_back(std::move(member));
      continue;
    }
    try {
      (void)node_options::parse(pieces[i]);
    } catch (const config_error& e) {
      // "redis://:pa,ss@host" splits inside its password, and the parser's
      // message would show "pa" as something else (a host, a port): when
      // the user info seems to go on after the ',' (an '@' before the next
      // piece that starts a URI of its own), say only where.
      bool user_info_goes_on = false;
      for (std::size_t j = i + 1; j < pieces.size() && !starts_like_uri(pieces[j]); ++j)
        user_info_goes_on = user_info_goes_on || pieces[j].find('@') != std::string_view::npos;
      if (user_info_goes_on) {
        throw usage_error(fmt::format(
            "{}: node URI {} is cut short by a ',' (not shown: it may hold a password; write a ',' inside "
            "a URI as %2C)",
            what, i + 1));
      }
      throw usage_error(fmt::format("{}: {}", what, e.what()));
    }
    uris.emplace_back(pieces[i]);
  }
  return uris;
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

bool is_rediss(std::string_view uri) {
  constexpr std::string_view prefix = "rediss://";
  if (uri.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    const char c = uri[i] >= 'A' && uri[i] <= 'Z' ? static_cast<char>(uri[i] - 'A' + 'a') : uri[i];
    if (c != prefix[i]) return false;
  }
  return true;
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
    const node_options as_given = node_options::parse(uri);
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
      check_tls_files(node_options::parse(uri));
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
