// The README's usage example, verbatim: lock a name on the testbed's five
// nodes (scripts/testbed up), do the work, unlock.
#include <iostream>
#include <redsync/redsync.hpp>
using namespace std::chrono_literals;

int main() {
  redsync::Redsync rs({"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003",
                       "redis://127.0.0.1:7004", "redis://127.0.0.1:7005"});
  redsync::Mutex mutex = rs.new_mutex("example:basic", {.expiry = 10s});
  if (auto r = mutex.lock(redsync::context::timeout(5s)); !r) {
    std::cerr << "lock failed: " << r.describe() << "\n";  // why, node by node
    return 1;
  }
  // ... work that must never run twice at once; pass mutex.token() to the resource ...
  if (auto r = mutex.unlock(redsync::context::timeout(2s)); !r) std::cerr << r.describe() << "\n";
}
