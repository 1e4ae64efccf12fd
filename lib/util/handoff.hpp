#pragma once

// One value handed from the loop thread to a caller thread that blocks for
// it, at the cost the kernel charges: one FUTEX_WAIT on the caller's side and
// one FUTEX_WAKE on the giver's when the caller had to sleep, no system call
// at all when the value was there before the caller looked.
//
// std::promise / std::future, used before, cost three futex operations per
// hand-over (a wake of the shared state's condition, a wake of its mutex's
// waiters and the wait itself) and two allocations.
//
// State word: empty (0) -> full (1), or empty -> asleep (2) -> full. The
// caller sleeps only on "asleep", so a wake can never be missed: the giver
// exchanges the word to "full" and makes the system call only if it saw
// "asleep". After that exchange the giver touches nothing but the word's
// address in the wake call, so the caller may return (and destroy this) as
// soon as it sees "full": a FUTEX_WAKE on an address nobody waits on is a
// no-op.

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <utility>

namespace redsync::detail {

template <class T>
class handoff {
 public:
  handoff() = default;
  handoff(const handoff&) = delete;
  handoff& operator=(const handoff&) = delete;

  // Giver, once (later calls are ignored): stores the value and wakes the
  // caller if it sleeps.
  void give(T value) {
    if (given_.exchange(true, std::memory_order_relaxed)) return;
    value_.emplace(std::move(value));
    if (state_.exchange(full, std::memory_order_acq_rel) == asleep) {
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
                0);
    }
  }

  // True once give() was called (by anyone): lets a guard that fires when
  // the giver is dropped unused give a default instead.
  bool given() const noexcept { return given_.load(std::memory_order_relaxed); }

  // Caller: true once the value is there (take() then returns at once).
  bool ready() const noexcept { return state_.load(std::memory_order_acquire) == full; }

  // Caller, once: blocks until give() and returns the value.
  T take() {
    std::uint32_t s = state_.load(std::memory_order_acquire);
    while (s != full) {
      if (s == empty &&
          !state_.compare_exchange_weak(s, asleep, std::memory_order_acquire, std::memory_order_acquire))
        continue;  // s now holds what is there: full, or a spurious failure
      // Sleeps only while the word still says asleep; returns at once (EAGAIN)
      // if the giver got there first, and on EINTR or a spurious wake-up the
      // loop looks again.
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, asleep, nullptr,
                nullptr, 0);
      s = state_.load(std::memory_order_acquire);
    }
    return std::move(*value_);
  }

 private:
  static constexpr std::uint32_t empty = 0;
  static constexpr std::uint32_t full = 1;
  static constexpr std::uint32_t asleep = 2;
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

  std::atomic<std::uint32_t> state_{empty};
  std::atomic<bool> given_{false};
  std::optional<T> value_;
};

}  // namespace redsync::detail
