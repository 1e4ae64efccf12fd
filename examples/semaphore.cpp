// A counting semaphore: at most k holders of a name across N masters, and
// how a resource fences them per slot.
//
// Two permits (k = 2). Worker A takes one and stalls past its expiry. Two
// more workers then take both permits; one of them gets A's slot, with a
// greater token. The resource keeps the highest token it accepted per slot,
// so A's late write on its slot is refused while the other slot's holders
// are not disturbed.
//
//   build/examples/semaphore [redis://127.0.0.1:7001 ...]
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <exception>
#include <map>
#include <string>
#include <thread>

#include "nodes.hpp"

using namespace std::chrono_literals;

namespace {

// A toy resource that follows the semaphore's fencing rule
// (include/redsync/semaphore.hpp): per slot, the highest token accepted; a
// write with a lower token for that slot is refused. In real life this check
// lives in the storage system and is atomic with the write.
class slotted_storage {
 public:
  bool write(const redsync::permit& p, const std::string& data) {
    auto& highest = highest_[p.slot()];
    if (p.token() < highest) {
      fmt::print("  storage: REJECTED \"{}\" on slot {} with token {} (slot {} accepted token {})\n", data,
                 p.slot(), p.token().value, p.slot(), highest.value);
      return false;
    }
    highest = p.token();
    fmt::print("  storage: accepted \"{}\" on slot {} with token {}\n", data, p.slot(), p.token().value);
    return true;
  }

 private:
  std::map<std::uint32_t, redsync::fencing_token> highest_;
};

redsync::permit take(redsync::Semaphore& sem, const char* who) {
  auto r = sem.acquire(redsync::context::timeout(5s));
  if (!r) {
    fmt::print(stderr, "{}: acquire failed: {}\n", who, r.describe());
    if (examples::nodes_unreachable(r.outcome)) fmt::print(stderr, "({})\n", examples::unreachable_hint);
    return {};
  }
  fmt::print("{}: permit on slot {}, fencing token {}\n", who, r.permit.slot(), r.permit.token().value);
  return std::move(r.permit);
}

}  // namespace

constexpr std::string_view usage =
    "Usage: semaphore [--help] [URI...]\n\n"
    "At most 2 holders of a name: worker A stalls past its permit's expiry, two\n"
    "more workers take both permits, and the resource refuses A's late write by\n"
    "the highest fencing token it accepted on A's slot.\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));
  slotted_storage store;
  // A short expiry, so that A's stall outlives its permit.
  auto sem = rs.new_semaphore("example:semaphore", 2, {.expiry = 300ms, .tries = 100});
  fmt::print("{} permits over {} nodes: each needs {} nodes (a majority would be {})\n", sem.permits(),
             rs.node_count(), sem.quorum(), rs.quorum());

  redsync::permit a = take(sem, "worker A");
  if (a.id().empty()) return 1;
  store.write(a, "A's first write");
  fmt::print("worker A: pausing for 500 ms (longer than the 300 ms expiry)...\n");
  std::this_thread::sleep_for(500ms);

  redsync::permit b = take(sem, "worker B");
  redsync::permit c = take(sem, "worker C");
  if (b.id().empty() || c.id().empty()) return 1;
  const bool b_ok = store.write(b, "B's write");
  const bool c_ok = store.write(c, "C's write");

  fmt::print("worker A: wakes up and writes on slot {} with token {}\n", a.slot(), a.token().value);
  const bool a_accepted = store.write(a, "A's late write");

  if (auto r = b.release(redsync::context::timeout(2s)); !r)
    fmt::print("worker B: release -> {}\n", r.describe());
  if (auto r = c.release(redsync::context::timeout(2s)); !r)
    fmt::print("worker C: release -> {}\n", r.describe());

  // The demonstration worked if B and C wrote and A's late write was refused.
  return b_ok && c_ok && !a_accepted ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
