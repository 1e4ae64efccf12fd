// The resource the chaos clients protect with the lock: a file mapped into
// every client process, one slot per lock name, updated with atomics only,
// so that it observes overlaps and stale writes as they happen, not as the
// clients believe they happen.
//
// Each slot holds:
// - the occupant: a marker (process id << 32 | section number, the process
//   id being random, so a reused pid cannot be mistaken) set on entering the
//   critical section and cleared on leaving; entering while it is set is an
//   overlap, seen at the moment it happens;
// - the fenced state: the highest fencing token seen (high 32 bits) and a
//   counter (low 32 bits), changed together by one compare-and-swap. A
//   section first *touches* the slot with its token (a fenced read of the
//   counter, refused unless the token is above every token seen), then, after
//   some work, *writes* counter + 1 (refused unless no higher token touched
//   the slot since). With fencing enforced, a stale holder's write is refused;
//   with it off (the meta-test's known-unsafe configuration), every write is
//   accepted and the slot still reports what it would have refused, and
//   whether the write overwrote another section's increment (a lost update).
//
// The file starts with a 64-byte header {magic, slot count, enforce fencing},
// written by the harness (tests/chaos/chaos.py reads the same layout).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace redsync::chaos {

class shared_resource {
 public:
  static constexpr std::uint64_t magic = 0x3153'4f41'4843'5352;  // "RSCHAOS1" little-endian

  // Maps the file at `path`, which the harness created. Throws
  // std::runtime_error naming the path and the problem.
  explicit shared_resource(const std::string& path);
  ~shared_resource();
  shared_resource(const shared_resource&) = delete;
  shared_resource& operator=(const shared_resource&) = delete;

  std::size_t slot_count() const noexcept { return slots_; }
  bool enforces_fencing() const noexcept { return enforce_; }

  // Sets the occupant of `slot` to `marker` (and its pid, which the nemesis
  // reads to pause a holder); returns the previous occupant (0 when free)
  // and its pid.
  struct previous_occupant {
    std::uint64_t marker = 0;
    std::uint64_t pid = 0;
  };
  previous_occupant enter(std::size_t slot, std::uint64_t marker, std::uint64_t pid);
  // Clears the occupant if it is still `marker`; false if another section
  // took it meanwhile.
  bool leave(std::size_t slot, std::uint64_t marker);

  struct touch_result {
    bool accepted = false;      // the token was above every token seen (always true unenforced)
    bool stale = false;         // the token was not above every token seen
    std::uint64_t highest = 0;  // the highest token seen before this touch
    std::uint64_t counter = 0;  // the counter read
  };
  touch_result touch(std::size_t slot, std::uint64_t token);

  struct write_result {
    bool accepted = false;      // the counter was set to read_value + 1
    bool stale = false;         // a higher token touched the slot since our touch
    bool overwrote = false;     // accepted, but another write landed since our read (a lost update)
    std::uint64_t highest = 0;  // the highest token seen at the write
    std::uint64_t counter_before = 0;
  };
  write_result write(std::size_t slot, std::uint64_t token, std::uint64_t read_value);

 private:
  struct slot {
    std::atomic<std::uint64_t> occupant;
    std::atomic<std::uint64_t> state;  // token << 32 | counter
    std::atomic<std::uint64_t> occupant_pid;
    std::uint64_t reserved[5];
  };
  static_assert(sizeof(slot) == 64);
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the slots are shared between processes");

  slot& at(std::size_t i);

  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::size_t slots_ = 0;
  bool enforce_ = true;
};

}  // namespace redsync::chaos
