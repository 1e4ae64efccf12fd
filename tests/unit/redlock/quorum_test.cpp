#include "redlock/quorum.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <limits>

using namespace std::chrono_literals;
using redsync::detail::command_timeout;
using redsync::detail::drift;
using redsync::detail::quorum;
using redsync::detail::saturating_add;
using redsync::detail::validity;

TEST_CASE("quorum is a strict majority of the nodes") {
  const std::size_t expected[] = {1, 2, 2, 3, 3, 4, 4};
  for (std::size_t n = 1; n <= 7; ++n) {
    CAPTURE(n);
    CHECK(quorum(n) == expected[n - 1]);
  }
  static_assert(quorum(5) == 3);
}

TEST_CASE("drift is expiry times drift_factor plus 2 ms") {
  CHECK(drift(8s, 0.01) == 82ms);
  CHECK(drift(8s, 0.0) == 2ms);
  CHECK(drift(10ms, 0.01) == 2100us);
  static_assert(drift(8s, 0.01) == 82ms);
}

TEST_CASE("drift rounds down to whole microseconds without floating-point wobble") {
  // 0.07 and 0.29 are not exact in binary; a naive product gives 69999.99...
  // or 290000.00...1 µs.
  CHECK(drift(1s, 0.07) == 70ms + 2ms);
  CHECK(drift(1s, 0.29) == 290ms + 2ms);
  CHECK(drift(8s, 0.1) == 802ms);
  // 1 ms * 0.0015 = 1.5 µs, rounded down.
  CHECK(drift(1ms, 0.0015) == 2001us);
}

TEST_CASE("command timeout is expiry times timeout_factor, at least 1 ms") {
  CHECK(command_timeout(8s, 0.05) == 400ms);
  CHECK(command_timeout(10ms, 0.05) == 1ms);
  CHECK(command_timeout(20ms, 0.05) == 1ms);
  CHECK(command_timeout(21ms, 0.05) == 1050us);
  static_assert(command_timeout(8s, 0.05) == 400ms);
}

TEST_CASE("validity is expiry minus elapsed minus drift, and may be negative") {
  CHECK(validity(8s, 100ms, 82ms) == 7818ms);
  CHECK(validity(8s, 0us, 0us) == 8s);
  CHECK(validity(100ms, 98ms, 2ms) == 0us);
  CHECK(validity(100ms, 99ms, 2ms) == -1ms);
  static_assert(validity(8s, 100ms, drift(8s, 0.01)) == 7818ms);
}

TEST_CASE("out-of-range factors are clamped rather than undefined") {
  CHECK(drift(8s, -0.5) == 2ms);
  CHECK(drift(8s, 2.0) == 8002ms);
  CHECK(command_timeout(8s, std::numeric_limits<double>::quiet_NaN()) == 1ms);
}

TEST_CASE("the arithmetic does not overflow at the largest accepted expiry") {
  const auto big = redsync::detail::max_expiry;
  CHECK(drift(big, 0.999999999) > std::chrono::microseconds{big} / 2);
  CHECK(command_timeout(big, 0.5) == std::chrono::microseconds{big} / 2);
}

TEST_CASE("a clock reading plus a delay saturates at the clock's last time point instead of overflowing") {
  using time_point = std::chrono::steady_clock::time_point;
  const time_point now = std::chrono::steady_clock::now();
  CHECK(saturating_add(now, 8s) == now + 8s);
  CHECK(saturating_add(time_point{}, redsync::detail::max_expiry) ==
        time_point{} + redsync::detail::max_expiry);
  // A guard window as long as max_expiry (~292 years) does not fit next to a
  // reading of the clock in nanoseconds.
  CHECK(saturating_add(now + 1h, redsync::detail::max_expiry) == time_point::max());
  CHECK(saturating_add(time_point::max(), 0ms) == time_point::max());
}
