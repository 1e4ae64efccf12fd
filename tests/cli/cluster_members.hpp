// Cluster members for the tests of the `redsync` tool: three local Redis
// Clusters, and the --nodes argument that names each as one member.
#pragma once

#include <string>

#include "redis_cluster.hpp"

namespace redsync::test {

struct three_clusters {
  redis_cluster c1{cluster_config{.masters = 3}};
  redis_cluster c2{cluster_config{.masters = 3}};
  redis_cluster c3{cluster_config{.masters = 3}};

  /// Each uri() is "redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...": the
  /// pieces without a scheme continue the member before them.
  std::string nodes_arg() const { return "--nodes=" + c1.uri() + "," + c2.uri() + "," + c3.uri(); }
};

}  // namespace redsync::test
