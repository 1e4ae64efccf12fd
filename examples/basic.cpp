// The smallest complete use of redsync: take a lock over N Redis masters, do
// the work it protects, release it.
//
//   build/examples/basic [redis://127.0.0.1:7001 ...]
#include <redsync/redsync.hpp>

#include <iostream>

#include "nodes.hpp"  // examples::node_uris: argv[1..], $REDSYNC_NODES or the testbed

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  redsync::Redsync rs(examples::node_uris(argc, argv));
  redsync::Mutex mutex = rs.new_mutex("example:basic", {.expiry = 10s});

  // Wait at most 5 s for the lock; on failure the result says why, per node.
  if (auto r = mutex.lock(redsync::context::timeout(5s)); !r) {
    std::cerr << "lock failed: " << r.describe() << "\n";
    return 1;
  }
  std::cout << "holding " << mutex.name() << ", fencing token " << mutex.token().value << "\n";
  // ... the work that must never run twice at once goes here ...

  if (auto r = mutex.unlock(redsync::context::timeout(2s)); !r) {
    std::cerr << "unlock failed: " << r.describe() << "\n";
    return 1;
  }
  std::cout << "released\n";
}
