// A multi-name lock takes several names at once, all or nothing on each node
// (one script call per node), as node-redlock's multi-resource locks do.
// Here a transfer locks both accounts it touches, so it cannot interleave
// with another transfer on either of them.
//
//   build/examples/multi_name [redis://127.0.0.1:7001 ...]
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <exception>

#include "nodes.hpp"

using namespace std::chrono_literals;

constexpr std::string_view usage =
    "Usage: multi_name [--help] [URI...]\n\n"
    "A multi-name lock: a transfer locks both accounts it touches, all or\nnothing on each node.\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));
  auto transfer = rs.new_multi_mutex({"example:account:alice", "example:account:bob"}, {.expiry = 5s});
  // Someone else working on bob's account alone.
  auto audit = rs.new_mutex("example:account:bob", {.expiry = 5s, .tries = 1});

  if (auto r = transfer.lock(redsync::context::timeout(5s)); !r) {
    fmt::print(stderr, "transfer lock failed: {}\n", r.describe());
    return 1;
  }
  fmt::print("transfer holds {} names: {} and {}\n", transfer.names().size(), transfer.names()[0],
             transfer.names()[1]);
  auto busy = audit.lock(redsync::context{});
  fmt::print("audit of bob while the transfer runs -> {}\n",
             busy ? "acquired (wrong!)" : busy.error.message());
  if (auto r = transfer.unlock(redsync::context{}); !r) fmt::print(stderr, "unlock: {}\n", r.describe());

  auto after = audit.lock(redsync::context{});
  fmt::print("audit of bob after the transfer -> {}\n", after ? "acquired" : after.error.message());
  if (after) (void)audit.unlock(redsync::context{});
  return busy || !after ? 1 : 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "multi_name: {}\n", e.what());
  return 1;
}
