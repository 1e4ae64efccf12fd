// Test harness: wait for a condition with a bound, instead of sleeping.
#pragma once

#include <chrono>
#include <thread>

namespace redsync::test {

/// Polls cond() every 2 ms until it returns true or bound has elapsed.
/// Returns the last result, so `CHECK(wait_until(...))` fails only after the
/// bound. cond is always evaluated at least once, and once more at the deadline.
template <class F>
bool wait_until(F cond, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return static_cast<bool>(cond());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace redsync::test
