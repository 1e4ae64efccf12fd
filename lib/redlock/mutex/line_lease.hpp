#pragma once

// What the client side of every waiting line shares (the mutex's
// waiting_line.hpp, the permits' semaphore/permit_line.hpp): a waiter's
// arrival, the number that ranks it on every node, and the lease that keeps
// its place between two of its attempts.

#include <chrono>
#include <string>

namespace redsync::detail {

// The arrival of a waiter: its wall clock in microseconds, the same number
// on every node (the nodes rank waiters by it, so they agree on the order).
inline std::string line_arrival_now() {
  using namespace std::chrono;
  return std::to_string(duration_cast<microseconds>(system_clock::now().time_since_epoch()).count());
}

// A waiter's lease in a line covering `wait` until its next attempt: twice
// that wait, plus the command timeout and a slack for scheduling and
// network delays. A waiter that misses its refresh by more than the slack
// (a long pause) loses its place.
inline std::chrono::milliseconds line_lease(std::chrono::milliseconds wait,
                                            std::chrono::microseconds timeout) {
  using namespace std::chrono;
  constexpr milliseconds slack{1000};
  return 2 * wait + duration_cast<milliseconds>(timeout) + slack;
}

}  // namespace redsync::detail
