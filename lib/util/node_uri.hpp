#pragma once

// Node URIs: turning "redis://..." and "unix:..." into node_options, the work
// behind node_options::parse.

#include <redsync/options.hpp>

#include <string_view>

namespace redsync::detail {

// Parses a node URI of one of the forms
//   redis://[user[:password]@]host[:port][/db]
//   unix:///path/to/redis.sock[?db=N]   (also unix:/path, as address() prints)
// Parts the URI leaves out keep node_options' defaults. Throws config_error
// naming the URI with any password replaced by "***", since config errors
// end up in logs.
node_options parse_node_uri(std::string_view uri);

}  // namespace redsync::detail
