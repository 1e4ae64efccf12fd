// The restart guard at work: one try_lock, then each node's part of the
// outcome. A node whose record is not yet verified for its current server
// run (`scripts/testbed restart 3` on a testbed that served locks) is
// repaired, and then kept out for the guard window (the lock's expiry): its
// "yes" is reported as excluded, with the reason, and does not count
// towards the quorum, since such a node may have lost the keys of a lock
// someone still holds. (A brand-new testbed, where no node has a fencing
// counter yet, votes at once: nothing can have been lost there.)
//
//   scripts/testbed up && scripts/testbed restart 3
//   build/examples/restart_guard                  # node 3 excluded at first
//   sleep 10 && build/examples/restart_guard      # counted again
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <exception>

#include "nodes.hpp"

using namespace std::chrono_literals;

constexpr std::string_view usage =
    "Usage: restart_guard [--help] [URI...]\n\n"
    "The restart guard at work: one try_lock, then each node's part of the\noutcome (a node not yet verified "
    "for its current server run is excluded).\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));  // restart_guard is on by default
  auto m = rs.new_mutex("example:restart_guard", {.expiry = 8s});
  auto r = m.try_lock(redsync::context{});
  for (const auto& n : r.nodes) {
    fmt::print("{:<22} {:<12} {}\n", n.address, redsync::to_string(n.status), n.message);
  }
  fmt::print("-> {}\n", r ? "acquired" : r.error.message());
  if (r) (void)m.unlock(redsync::context{});
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "restart_guard: {}\n", e.what());
  return 1;
}
