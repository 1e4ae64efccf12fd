// Why a lock alone is not enough, and what fencing tokens add (Martin
// Kleppmann, "How to do distributed locking", 2016).
//
// Client A takes the lock, then stalls (a GC pause, a swapped-out page, a
// frozen VM) for longer than the lock's expiry. The lock expires, client B
// takes it and writes. Then A wakes up, still believing it holds the lock,
// and writes too. Without help from the resource, B's write is silently
// overwritten. With fencing, every acquisition carries a token that is higher
// than every earlier holder's; the resource remembers the highest token it has
// accepted and rejects a write carrying a lower one, so A's late write fails.
//
//   build/examples/fenced_resource [redis://127.0.0.1:7001 ...]
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <exception>
#include <string>
#include <thread>

#include "nodes.hpp"

using namespace std::chrono_literals;

namespace {

// A toy storage service that checks fencing tokens. In real life this check
// lives in the storage system itself (a conditional write, a version column),
// and must be atomic with the write.
class storage {
 public:
  bool write(redsync::fencing_token token, const std::string& data) {
    if (token < highest_) {
      fmt::print("  storage: REJECTED write \"{}\" with token {} (already accepted token {})\n", data,
                 token.value, highest_.value);
      return false;
    }
    highest_ = token;
    data_ = data;
    fmt::print("  storage: accepted write \"{}\" with token {}\n", data, token.value);
    return true;
  }
  const std::string& data() const { return data_; }

 private:
  redsync::fencing_token highest_{};
  std::string data_;
};

bool acquire(redsync::Mutex& m, const char* who) {
  auto r = m.lock(redsync::context::timeout(5s));
  if (!r) {
    fmt::print(stderr, "{}: lock failed: {}\n", who, r.describe());
    if (examples::nodes_unreachable(r)) fmt::print(stderr, "({})\n", examples::unreachable_hint);
    return false;
  }
  fmt::print("{}: acquired the lock, fencing token {}\n", who, m.token().value);
  return true;
}

}  // namespace

constexpr std::string_view usage =
    "Usage: fenced_resource [--help] [URI...]\n\n"
    "Why a lock alone is not enough: client A stalls past its lock's expiry,\nclient B takes the lock, and "
    "the resource rejects A's late write by its\nfencing token.\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));
  storage store;

  // A short expiry and no auto-extension, so that A's stall outlives its lock.
  const redsync::mutex_options opts{.expiry = 300ms, .tries = 100};
  auto client_a = rs.new_mutex("example:fenced_resource", opts);
  auto client_b = rs.new_mutex("example:fenced_resource", opts);

  if (!acquire(client_a, "client A")) return 1;
  const redsync::fencing_token t1 = client_a.token();

  fmt::print("client A: pausing for 500 ms (longer than the 300 ms expiry)...\n");
  std::this_thread::sleep_for(500ms);

  // Meanwhile A's lock expired, so B gets it, with a higher token.
  if (!acquire(client_b, "client B")) return 1;
  const redsync::fencing_token t2 = client_b.token();
  store.write(t2, "written by B");

  // A wakes up and writes with its old token. (Checking held() first would
  // not help: the pause can just as well fall between the check and the
  // write.) The storage has seen token t2 > t1 and refuses.
  fmt::print("client A: wakes up and writes with token {}\n", t1.value);
  const bool a_write_accepted = store.write(t1, "written by A");

  // A's release finds B's value instead of its own and leaves it alone.
  if (auto r = client_a.unlock(redsync::context::timeout(2s)); !r)
    fmt::print("client A: unlock -> {}\n", r.describe());
  if (auto r = client_b.unlock(redsync::context::timeout(2s)); !r) {
    fmt::print(stderr, "client B: unlock failed: {}\n", r.describe());
    return 1;
  }
  fmt::print("client B: released\nstorage now holds \"{}\"\n", store.data());

  // The demonstration worked if tokens increased and A's late write was refused.
  return t2 > t1 && !a_write_accepted && store.data() == "written by B" ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
