// TEST ONLY: the failover check switched off (failover_check_test_access.hpp).

#include "redlock/trust/failover_check_test_access.hpp"

#include <atomic>

namespace redsync::detail {

namespace {

// Read on every loop thread's acquisition; written once, before any.
std::atomic<bool> check_off{false};

}  // namespace

void failover_check_test_access::disable() {
  check_off.store(true, std::memory_order_relaxed);
}

bool failover_check_test_access::disabled() noexcept {
  return check_off.load(std::memory_order_relaxed);
}

}  // namespace redsync::detail
