// Splitting a cluster member URI into its seeds: each seed becomes the
// standalone URI it would be alone and goes through node_uri's parser, so
// credentials, TLS parameters and their errors are handled in one place.

#include "util/cluster_uri.hpp"

#include "util/ascii.hpp"
#include "util/node_uri.hpp"
#include "util/redacted_uri.hpp"

#include <redsync/error.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace redsync::detail {
namespace {

struct scheme {
  std::string_view cluster;     // as written in a cluster URI
  std::string_view standalone;  // what each seed becomes
};
constexpr scheme schemes[] = {{"redis+cluster://", "redis://"}, {"rediss+cluster://", "rediss://"}};

const scheme* scheme_of(std::string_view uri) {
  for (const scheme& s : schemes) {
    if (starts_with_nocase(uri, s.cluster)) return &s;
  }
  return nullptr;
}

}  // namespace

bool is_cluster_uri(std::string_view uri) noexcept {
  return scheme_of(uri) != nullptr;
}

std::vector<node_options> parse_cluster_uri(std::string_view uri) {
  const redacted_uri redacted(uri, true);
  const auto fail = [&](const std::string& why) {
    throw config_error(fmt::format("invalid cluster URI \"{}\": {}", redacted.shown(uri), why));
  };
  const scheme* s = scheme_of(uri);
  if (s == nullptr) fail("expected redis+cluster:// or rediss+cluster://");
  const std::string_view rest = uri.substr(s->cluster.size());
  // The user info ends at the last '@', as in a standalone URI (a password
  // may hold a raw ','); the seed list ends at the path, query or fragment.
  const std::size_t at = rest.rfind('@');
  const std::size_t hosts_begin = at == std::string_view::npos ? 0 : at + 1;
  std::size_t hosts_end = rest.find_first_of("/?#", hosts_begin);
  if (hosts_end == std::string_view::npos) hosts_end = rest.size();
  const std::string_view hosts = rest.substr(hosts_begin, hosts_end - hosts_begin);
  const std::string_view before = rest.substr(0, hosts_begin);
  const std::string_view after = rest.substr(hosts_end);
  if (hosts.empty()) fail("no seed node (expected host:port[,host:port...])");

  std::vector<node_options> seeds;
  std::size_t index = 0;
  for (std::size_t pos = 0;; ++index) {
    const std::size_t comma = hosts.find(',', pos);
    const std::string_view host =
        hosts.substr(pos, comma == std::string_view::npos ? hosts.npos : comma - pos);
    if (host.empty()) fail(fmt::format("seed {} is empty (a stray ',')", index + 1));
    const std::string seed = fmt::format("{}{}{}{}", s->standalone, before, host, after);
    node_options node;
    try {
      node = parse_node_uri(seed);
    } catch (const config_error& e) {
      // The seed's own message already shows it redacted.
      fail(fmt::format("seed {} ({}): {}", index + 1, redacted.shown(host), e.what()));
    }
    if (node.db != 0) fail(fmt::format("db {}: a cluster has only db 0", node.db));
    bool repeated = false;
    for (const node_options& n : seeds) repeated = repeated || n.address() == node.address();
    if (!repeated) seeds.push_back(std::move(node));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return seeds;
}

}  // namespace redsync::detail
