#pragma once

/// \file
/// How an acquisition retries: `unlimited_tries` for `mutex_options::tries`
/// and `semaphore_options::tries`, and `retry_delay_option`, the type of
/// their `retry_delay` field (a fixed duration or a function of the try
/// number).

#include <redsync/export.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <limits>
#include <type_traits>
#include <utility>

namespace redsync {

/// `tries = redsync::unlimited_tries`: `lock()` (and `acquire`) keep trying
/// until they succeed, or their context's deadline passes or it is
/// cancelled, as `std::mutex::lock()` blocks. The largest `int`.
inline constexpr int unlimited_tries = std::numeric_limits<int>::max();

class retry_delay_option;

namespace detail {
template <class T>
struct is_chrono_duration : std::false_type {};
template <class Rep, class Period>
struct is_chrono_duration<std::chrono::duration<Rep, Period>> : std::true_type {};

// A callable the option accepts: int try_number -> something that converts
// implicitly to milliseconds (milliseconds, seconds, minutes, ...).
template <class F>
concept retry_delay_callable = !std::is_same_v<std::remove_cvref_t<F>, retry_delay_option> &&
                               !is_chrono_duration<std::remove_cvref_t<F>>::value &&
                               !std::is_same_v<std::remove_cvref_t<F>, std::nullptr_t> &&
                               std::is_invocable_r_v<std::chrono::milliseconds, std::remove_cvref_t<F>&, int>;

template <class T>
inline constexpr bool always_false = false;
}  // namespace detail

/// The delay before each retry of an acquisition (`mutex_options::retry_delay`,
/// `semaphore_options::retry_delay`). Converts implicitly from
/// - nothing (`{}`, the default) or `nullptr`: uniformly random in
///   [50 ms, 250 ms) for each retry, as go-redsync;
/// - any `std::chrono::duration`: that delay before every retry,
///   `{.retry_delay = 100ms}`; rounded up to whole milliseconds; must be in
///   [0, 24 h], checked when the mutex or semaphore is made (`config_error`
///   naming the field and the value);
/// - any callable taking the try number (`int`, from 1) and returning
///   `std::chrono::milliseconds` (or a duration that converts to it without
///   loss, such as `std::chrono::seconds`):
///   `{.retry_delay = [](int n) { return n * 10ms; }}`, called on the loop
///   thread before try `n + 1` (must not block; a negative result counts as 0).
///
/// Anything else (`.retry_delay = 100`, a lambda returning `int` or
/// microseconds) stops the build with a `static_assert` that says what the
/// field takes.
class retry_delay_option {
 public:
  using function = std::function<std::chrono::milliseconds(int try_number)>;

  /// The default: random in [50 ms, 250 ms).
  retry_delay_option() noexcept = default;
  /// The default, as an empty `std::function` was before this type.
  retry_delay_option(std::nullptr_t) noexcept {}
  /// The same delay before every retry.
  template <class Rep, class Period>
  retry_delay_option(const std::chrono::duration<Rep, Period>& d) noexcept
      : fixed_ms_(std::chrono::duration<double, std::milli>(d).count()), fixed_(true) {}
  /// A function of the try number; an empty `std::function` means the default.
  template <class F>
  requires detail::retry_delay_callable<F> retry_delay_option(F&& f) : function_(std::forward<F>(f)) {}
  /// Anything else: a compile error that names the field.
  template <class T>
  requires(!detail::retry_delay_callable<T> && !std::is_same_v<std::remove_cvref_t<T>, retry_delay_option> &&
           !detail::is_chrono_duration<std::remove_cvref_t<T>>::value &&
           !std::is_same_v<std::remove_cvref_t<T>, std::nullptr_t>) retry_delay_option(T&&) {
    static_assert(
        detail::always_false<T>,
        "redsync: retry_delay takes a std::chrono duration (retry_delay = 100ms) or a callable "
        "int try_number -> std::chrono::milliseconds (retry_delay = [](int n) { return n * 10ms; })");
  }

  /// True unless this is the default (random) delay.
  explicit operator bool() const noexcept { return fixed_ || static_cast<bool>(function_); }
  /// True for a fixed duration.
  bool is_fixed() const noexcept { return fixed_; }
  /// The fixed duration as given, in (fractional) milliseconds, for
  /// validation and messages; 0 unless `is_fixed()`.
  double fixed_milliseconds() const noexcept { return fixed_ms_; }

  /// The delay before try `try_number + 1`: the fixed duration (rounded up,
  /// clamped to [0, 24 h]) or the function's result. Throws
  /// `std::bad_function_call` for the default, whose delays are random and
  /// drawn by the library.
  std::chrono::milliseconds operator()(int try_number) const {
    if (!fixed_) return function_(try_number);
    // Written so that NaN gives 0: every comparison with NaN is false.
    if (!(fixed_ms_ > 0.0)) return std::chrono::milliseconds::zero();
    if (fixed_ms_ >= static_cast<double>(longest_fixed.count())) return longest_fixed;
    return std::chrono::ceil<std::chrono::milliseconds>(std::chrono::duration<double, std::milli>(fixed_ms_));
  }

  /// The longest fixed delay accepted: 24 hours.
  static constexpr std::chrono::milliseconds longest_fixed{24LL * 60 * 60 * 1000};

 private:
  function function_{};
  double fixed_ms_ = 0.0;
  bool fixed_ = false;
};

}  // namespace redsync
