// The retry options as a Go user writes them: `{.retry_delay = 100ms}`
// compiles, in designated initializers of both option structs, and gives
// the delay used before every retry; a callable still works; a bad fixed
// delay is a config_error naming the field and the value.

#include "redlock/options_check.hpp"

#include <redsync/options.hpp>
#include <redsync/semaphore_options.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <limits>
#include <type_traits>

using namespace std::chrono_literals;
using redsync::config_error;
using redsync::mutex_options;
using redsync::retry_delay_option;
using redsync::semaphore_options;

TEST_CASE("{.retry_delay = 100ms} compiles and gives 100 ms before tries 2, 3 and 4") {
  const mutex_options o{.expiry = 10s, .tries = 5, .retry_delay = 100ms};
  REQUIRE(o.retry_delay);
  CHECK(o.retry_delay.is_fixed());
  CHECK(o.retry_delay(1) == 100ms);
  CHECK(o.retry_delay(2) == 100ms);
  CHECK(o.retry_delay(3) == 100ms);
  CHECK_NOTHROW(redsync::detail::check_mutex_options("lock", o));

  const semaphore_options s{.tries = 3, .retry_delay = 2s};
  CHECK(s.retry_delay(1) == 2000ms);
  CHECK_NOTHROW(redsync::detail::check_semaphore_options("sem", s));
}

TEST_CASE("any duration converts: coarser exactly, finer and fractional rounded up to whole ms") {
  CHECK(retry_delay_option(1min)(1) == 60000ms);
  CHECK(retry_delay_option(1500us)(1) == 2ms);
  CHECK(retry_delay_option(std::chrono::duration<double>(0.25))(1) == 250ms);
  CHECK(retry_delay_option(0ms)(7) == 0ms);
}

TEST_CASE("a callable of the try number still works, and the default is unset") {
  const mutex_options o{.retry_delay = [](int n) { return n * 10ms; }};
  CHECK_FALSE(o.retry_delay.is_fixed());
  CHECK(o.retry_delay(1) == 10ms);
  CHECK(o.retry_delay(2) == 20ms);
  CHECK(o.retry_delay(3) == 30ms);
  // Returning seconds converts without loss, as std::function allowed.
  CHECK(retry_delay_option([](int) { return 1s; })(1) == 1000ms);

  mutex_options d;
  CHECK_FALSE(d.retry_delay);
  CHECK_THROWS_AS(d.retry_delay(1), std::bad_function_call);
  d.retry_delay = [](int) { return 5ms; };  // assignment, as before
  CHECK(d.retry_delay(1) == 5ms);
  d.retry_delay = std::function<std::chrono::milliseconds(int)>{};  // empty: the default again
  CHECK_FALSE(d.retry_delay);
  d.retry_delay = nullptr;
  CHECK_FALSE(d.retry_delay);
  // Copies stay what they were (the converting constructors do not wrap an option).
  retry_delay_option fixed = 7ms;
  retry_delay_option copy = fixed;
  CHECK(copy.is_fixed());
  CHECK(copy(1) == 7ms);
}

TEST_CASE("the callable path claims only callables returning milliseconds or a coarser duration") {
  // The catch-all constructor exists only to fail with a message, so the
  // types below are convertible in name; what matters is that the callable
  // and duration paths do not claim them.
  CHECK_FALSE(redsync::detail::retry_delay_callable<int>);
  CHECK_FALSE(redsync::detail::retry_delay_callable<decltype([](int) { return 5; })>);
  CHECK_FALSE(redsync::detail::retry_delay_callable<decltype([](int) { return 5us; })>);
  CHECK(redsync::detail::retry_delay_callable<decltype([](int) { return 5ms; })>);
}

TEST_CASE("a fixed retry delay must be in [0, 24 h]; the message names the field and the value") {
  CHECK_THROWS_WITH_AS(redsync::detail::check_mutex_options("lock", {.retry_delay = -5ms}),
                       "mutex_options.retry_delay = -5 ms: must not be negative", config_error);
  CHECK_THROWS_WITH_AS(redsync::detail::check_semaphore_options("sem", {.retry_delay = -500us}),
                       "semaphore_options.retry_delay = -0.5 ms: must not be negative", config_error);
  CHECK_THROWS_WITH_AS(
      redsync::detail::check_mutex_options(
          "lock", {.retry_delay = std::chrono::duration<double>(std::numeric_limits<double>::quiet_NaN())}),
      "mutex_options.retry_delay = nan ms: must not be negative", config_error);
  CHECK_THROWS_WITH_AS(redsync::detail::check_mutex_options("lock", {.retry_delay = 25h}),
                       "mutex_options.retry_delay = 90000000 ms: must be at most 86400000 ms (24 h)",
                       config_error);
  CHECK_NOTHROW(redsync::detail::check_mutex_options("lock", {.retry_delay = 24h}));
  CHECK_NOTHROW(redsync::detail::check_mutex_options("lock", {.retry_delay = 0ms}));
}

TEST_CASE("tries = unlimited_tries is accepted by both option structs") {
  CHECK(redsync::unlimited_tries == std::numeric_limits<int>::max());
  CHECK_NOTHROW(redsync::detail::check_mutex_options("lock", {.tries = redsync::unlimited_tries}));
  CHECK_NOTHROW(redsync::detail::check_semaphore_options("sem", {.tries = redsync::unlimited_tries}));
}
