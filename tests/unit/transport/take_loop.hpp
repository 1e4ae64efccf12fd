#pragma once

// Borrows an owned event_loop for a test, as a blocking call would: its
// thread lends the loop once callers ask for it; until then a caller posts
// (which wakes it to learn that callers are asking). Leaves `lent` empty
// if the loop was never lent within about 2 s.

#include "transport/event_loop.hpp"

#include <chrono>
#include <optional>
#include <thread>

namespace redsync::test {

inline void take_loop(detail::event_loop& loop, std::optional<detail::event_loop::borrow>& lent) {
  for (int i = 0; i < 200; ++i) {
    lent.emplace(loop);
    if (*lent) return;
    lent.reset();
    loop.post([] {});
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace redsync::test
