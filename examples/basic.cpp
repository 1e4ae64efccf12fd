// The README's usage example: lock a name on the testbed's nodes
// (scripts/testbed up), do the work, unlock. The README reads the nodes with
// redsync::members_from_env(); here they come from the arguments,
// REDSYNC_NODES or REDSYNC_TESTBED_PORT (examples/nodes.hpp), so the example
// also runs without REDSYNC_NODES against a testbed on other ports.
#include <iostream>
#include <redsync/redsync.hpp>

#include "nodes.hpp"
using namespace std::chrono_literals;

constexpr std::string_view usage =
    "Usage: basic [--help] [URI...]\n\n"
    "Locks example:basic (expiry 10 s, waiting at most 5 s), then unlocks it.\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));
  redsync::Mutex mutex = rs.new_mutex("example:basic", {.expiry = 10s});
  if (auto r = mutex.lock(redsync::context::timeout(5s)); !r) {
    std::cerr << "lock failed: " << r.describe() << "\n";  // why, node by node
    return 1;
  }
  // ... work that must never run twice at once; pass mutex.token() to the resource ...
  if (auto r = mutex.unlock(redsync::context::timeout(2s)); !r) std::cerr << r.describe() << "\n";
} catch (const std::exception& e) {
  std::cerr << "basic: " << e.what() << "\n";
  return 1;
}
