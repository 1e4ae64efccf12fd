// Test helpers for the ACL tests (acl_test.cpp, cluster_acl_test.cpp): the
// document whose rules they prove, and the check that an operation met no
// server error on any node (a missing right shows as a node's error even
// when a quorum is reached).
#pragma once

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace redsync::test {

/// The text of docs/acl.md, whose path $REDSYNC_ACL_DOC gives (tests/redis/meson.build sets it).
inline std::string read_acl_doc() {
  const char* path = std::getenv("REDSYNC_ACL_DOC");
  REQUIRE_MESSAGE(path != nullptr, "REDSYNC_ACL_DOC (the path of docs/acl.md) is not set");
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Checks that `r` succeeded and that no node answered with a server error;
/// `what` names the operation in the messages.
inline void check_no_server_error(const redsync::result& r, const char* what) {
  CHECK_MESSAGE(r.ok(), what, ": ", r.describe());
  for (const auto& n : r.nodes)
    CHECK_MESSAGE(n.error_class == redsync::server_error::none, what, ": ", n.address, ": ", n.message);
}

}  // namespace redsync::test
