// One critical section of a chaos client, the same for the library clients
// and for the command run by `redsync lock`: enter the shared resource, touch
// it with the fencing token, work, write, leave, recording each step.
#pragma once

#include "history.hpp"
#include "shared_resource.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace redsync::chaos {

struct section_plan {
  std::size_t slot = 0;
  std::string name;
  std::uint64_t token = 0;
  // When the lock's validity ends (steady clock, ns), as the holder knows
  // it; 0 when the holder cannot know (the command of `redsync lock`).
  std::int64_t until_ns = 0;
  std::chrono::milliseconds work{0};
  // Asked just before the write, when set: false = the holder knows it no
  // longer holds the lock, so it leaves without writing.
  std::function<bool()> still_held{};
  // The current validity end, asked when leaving (auto-extension moves it).
  std::function<std::int64_t()> until_at_leave{};
};

// Runs the section and records "enter", "touch", "write" (or "abandon") and
// "leave" in `h`. A token that does not fit the resource's 32 bits is
// recorded as "token_overflow" and skipped.
void run_section(shared_resource& resource, history& h, const section_plan& plan);

}  // namespace redsync::chaos
