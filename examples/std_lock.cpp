// A redsync::Mutex is a standard Lockable and TimedLockable, so the standard
// RAII wrappers work with it; redsync::guard is the same idea without
// exceptions, reporting routine failures as values.
//
//   build/examples/std_lock [redis://127.0.0.1:7001 ...]
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <exception>
#include <mutex>

#include "nodes.hpp"

using namespace std::chrono_literals;

constexpr std::string_view usage =
    "Usage: std_lock [--help] [URI...]\n\n"
    "redsync::Mutex with std::lock_guard, std::unique_lock and redsync::guard.\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));
  // A Mutex is one holder: two holders of the same name need two Mutexes.
  // `tries` bounds how long the throwing lock() keeps retrying (~5 s here).
  auto alice = rs.new_mutex("example:std_lock", {.expiry = 5s, .tries = 25});
  auto bob = rs.new_mutex("example:std_lock", {.expiry = 5s, .tries = 25});

  // 1. std::lock_guard: lock() throws redsync::lock_error if it cannot
  //    acquire; the destructor calls unlock(), which never throws.
  {
    std::lock_guard hold(alice);
    fmt::print("lock_guard: alice holds {} (token {})\n", alice.name(), alice.token().value);
    // While alice holds it, bob's single attempt fails.
    fmt::print("lock_guard: bob.try_lock() -> {}\n", bob.try_lock());
  }
  fmt::print("lock_guard: released\n");

  // 2. std::unique_lock + try_lock_for: keep trying for at most 2 s.
  {
    std::unique_lock hold(bob, std::defer_lock);
    if (!hold.try_lock_for(2s)) {
      fmt::print(stderr, "unique_lock: no lock within 2 s: {}\n", bob.last_result().describe());
      return 1;
    }
    fmt::print("unique_lock: bob holds it (token {}, higher than alice's {})\n", bob.token().value,
               alice.token().value);
  }
  if (auto r = bob.last_result(); !r) fmt::print(stderr, "unique_lock: release failed: {}\n", r.describe());

  // 3. redsync::guard: no exceptions; test it, and read the outcome on failure.
  {
    redsync::guard g(alice, redsync::context::timeout(2s));
    if (!g) {
      fmt::print(stderr, "guard: no lock: {}\n", g.outcome().describe());
      return 1;
    }
    fmt::print(
        "guard: alice holds it again (token {}), valid for another {} ms\n", g.token().value,
        std::chrono::duration_cast<std::chrono::milliseconds>(g.until() - std::chrono::steady_clock::now())
            .count());
    // Releasing explicitly gives the outcome; otherwise the destructor does it.
    if (auto r = g.unlock(); !r) fmt::print(stderr, "guard: release failed: {}\n", r.describe());
  }
  fmt::print("guard: released\n");
  return 0;
} catch (const redsync::lock_error& e) {
  // The outcome says, node by node, why the lock could not be had.
  fmt::print(stderr, "lock failed: {}\n", e.what());
  if (examples::nodes_unreachable(e.outcome())) fmt::print(stderr, "({})\n", examples::unreachable_hint);
  return 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
