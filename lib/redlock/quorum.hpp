#pragma once

// Redlock arithmetic: quorum size, clock-drift allowance, per-node command
// timeout and remaining validity. Pure and constexpr so it can be unit-tested
// without a server.
//
// From the Redis distributed-lock spec
// (https://redis.io/docs/latest/develop/use/patterns/distributed-locks/):
// a client that set the key on N masters "is considered to have acquired the
// lock if and only if it was able to acquire the lock in the majority of the
// instances (at least N/2+1)", and the lock is valid for
//
//     validity = TTL - (T2 - T1) - CLOCK_DRIFT
//
// where TTL is the key's expiry, T2 - T1 the time the acquisition took, and
// CLOCK_DRIFT an allowance for the masters' clocks running at different
// rates. As in go-redsync, drift = expiry * drift_factor + 2 ms (the 2 ms
// covers the granularity of Redis' PX expiry), and each node gets a command
// timeout that is "small compared to the total lock auto-release time".
//
// The factors are doubles, but the products must not wobble with binary
// rounding (8 s * 0.07 must be exactly 560 ms, not 559.999...), so a factor is
// first rounded to parts per billion and the product is then computed in
// integers, rounding down. Factors with more than nine decimals lose at most
// expiry * 1e-9 (under 1 µs for expiries below 1000 s).
//
// Preconditions (enforced by check_mutex_options, not here): expiry > 0 and
// at most max_expiry; factors finite and in [0, 1). Out-of-range factors are
// clamped so that a mistake here cannot be undefined behaviour.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace redsync::detail {

/// The largest expiry whose microsecond arithmetic below cannot overflow
/// (about 292 years).
inline constexpr std::chrono::milliseconds max_expiry{std::numeric_limits<std::int64_t>::max() / 1'000'000};

/// Fixed part of the drift allowance, for Redis' millisecond expiry
/// granularity.
inline constexpr std::chrono::milliseconds drift_floor{2};

/// Smallest per-node command timeout.
inline constexpr std::chrono::milliseconds min_command_timeout{1};

/// Nodes that must agree among `n`: a strict majority, n/2 + 1.
constexpr std::size_t quorum(std::size_t n) noexcept {
  return n / 2 + 1;
}

namespace quorum_internal {

// `factor` rounded to the nearest billionth, clamped to [0, 1e9]. NaN and
// negatives give 0.
constexpr std::int64_t to_ppb(double factor) noexcept {
  if (!(factor > 0.0)) return 0;
  if (factor >= 1.0) return 1'000'000'000;
  return static_cast<std::int64_t>(factor * 1e9 + 0.5);
}

// floor(expiry * factor) in microseconds. expiry_ms * ppb / 1e6 is split so
// that no intermediate exceeds expiry_ms * 1e6, which max_expiry keeps below
// INT64_MAX.
constexpr std::chrono::microseconds scale(std::chrono::milliseconds expiry, double factor) noexcept {
  const std::int64_t ms = expiry.count() > 0 ? expiry.count() : 0;
  const std::int64_t ppb = to_ppb(factor);
  const std::int64_t whole = ppb / 1'000'000;  // µs per ms of expiry
  const std::int64_t part = ppb % 1'000'000;   // millionths of a µs per ms
  return std::chrono::microseconds{ms * whole + ms * part / 1'000'000};
}

}  // namespace quorum_internal

/// Clock-drift allowance: floor(expiry * drift_factor) + 2 ms, in µs.
/// Example: drift(8s, 0.01) == 82ms.
constexpr std::chrono::microseconds drift(std::chrono::milliseconds expiry, double drift_factor) noexcept {
  return quorum_internal::scale(expiry, drift_factor) + drift_floor;
}

/// Per-node command timeout: floor(expiry * timeout_factor), at least 1 ms.
/// Example: command_timeout(8s, 0.05) == 400ms.
constexpr std::chrono::microseconds command_timeout(std::chrono::milliseconds expiry,
                                                    double timeout_factor) noexcept {
  const std::chrono::microseconds t = quorum_internal::scale(expiry, timeout_factor);
  return t < min_command_timeout ? std::chrono::microseconds{min_command_timeout} : t;
}

/// Time the lock remains safe to use: expiry - elapsed - drift. Zero or
/// negative means the acquisition took too long and the lock must be
/// released, not used.
constexpr std::chrono::microseconds validity(std::chrono::milliseconds expiry,
                                             std::chrono::microseconds elapsed,
                                             std::chrono::microseconds drift) noexcept {
  return std::chrono::microseconds{expiry} - elapsed - drift;
}

/// `t + d` for a `t` at or after the clock's epoch (any steady_clock
/// reading) and `d` >= 0, or the clock's last time point when the sum does
/// not fit: a delay may be as long as max_expiry, which in nanoseconds
/// leaves no room for the clock's own reading.
inline std::chrono::steady_clock::time_point saturating_add(std::chrono::steady_clock::time_point t,
                                                            std::chrono::milliseconds d) noexcept {
  using time_point = std::chrono::steady_clock::time_point;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(time_point::max() - t);
  return d <= room ? t + d : time_point::max();
}

}  // namespace redsync::detail
