// node_options::parse and member_options::parse, which hand the URI to
// util/node_uri or util/cluster_uri, and node_options::address, the form
// results and messages name a node by.

#include <redsync/options.hpp>

#include "util/cluster_uri.hpp"
#include "util/node_uri.hpp"

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace redsync {

node_options node_options::parse(std::string_view uri) {
  return detail::parse_node_uri(uri);
}

member_options member_options::parse(std::string_view uri) {
  if (detail::is_cluster_uri(uri)) return {detail::parse_cluster_uri(uri), true};
  return {{detail::parse_node_uri(uri)}, false};
}

std::string node_options::address() const {
  if (!unix_path.empty()) return "unix:" + unix_path;
  // A ':' in the host means IPv6, which needs brackets to keep the port apart.
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

}  // namespace redsync
