#pragma once

// The decisions of a holder's calls (holder_operations.cpp: unlock, extend
// by hand or from the watchdog, valid), without I/O, as acquisition_steps
// is for the acquisition: told what happened (the mutex's state read under
// its lock, a round's tally, the time passed in, never read here), it
// answers with the next step. Tested without a server
// (tests/unit/redlock/holder_steps_test.cpp).
//
//   unlock:         start --> send_release | finish(not_held) | finish(drop_hold)
//                   on_released --> finish (the verdict; whether the value is released)
//   extend, check:  start --> prepare_round | finish(refused)
//                   on_round_ready --> send_round (cutting the validity first, for a shorter TTL)
//                   on_answered --> finish | set_validity (an extension that won)
//                   on_validity_set --> finish (or release everywhere: lost meanwhile)
//
// Invariants (each pinned by a test):
//  - success only with a quorum of yes; "taken" or "expired" only when no
//    quorum can still hold our value (holder_failure);
//  - an unlock is never refused for its context: it goes out if there is
//    a value, and a loss reported meanwhile is still told (errc::lost);
//  - an extension's validity is duration - elapsed - drift from its
//    round's start, never longer, and none left is validity_elapsed; one
//    that sets a shorter TTL cuts the validity before anything is sent;
//  - an extension never re-arms the keys of a lock lost or let go, and
//    releases them when the loss came while it was in flight;
//  - an unlock of a reentrant mutex held more than once takes one hold and
//    sends nothing only while the lock is valid (not lost, not let go,
//    before its validity's end); otherwise the release goes out.

#include "redlock/engine/tally.hpp"

#include <redsync/error.hpp>

#include <chrono>
#include <cstddef>

namespace redsync::detail {

enum class holder_call { release, extend, auto_extend, check };

struct holder_rules {
  std::size_t nodes = 1;
  std::size_t quorum = 1;
  holder_call call = holder_call::check;
  std::chrono::milliseconds expiry{0};  // the mutex's
  // extend: the TTL it sets (the expiry, or extend(duration)'s), and the
  // drift allowance over it.
  std::chrono::milliseconds duration{0};
  std::chrono::microseconds drift{0};
  // release: every hold of a reentrant mutex (the destructor's release).
  bool every_hold = false;
};

// The mutex's state when the call's turn comes, read under its lock.
struct holder_facts {
  bool has_value = false;        // a value to act on (for unlock: not released yet)
  bool watchdog_active = false;  // the watchdog runs (an automatic extension needs it)
  bool lost = false;             // the lost signal was raised
  bool let_go = false;           // released, or the caller let go (held() is false)
  // A reentrant mutex's unlocks still awaited (mutex_state::holds), and
  // the end of the lock's validity.
  std::size_t holds = 0;
  std::chrono::steady_clock::time_point until{};
};

struct holder_step {
  using clock = std::chrono::steady_clock;

  enum class kind {
    nothing,        // out of turn
    send_release,   // the release round (retried in the background), then on_released
    prepare_round,  // build the extend or check call, then on_round_ready
    send_round,     // (cut the validity to `valid_until` first if `cut_validity`), then on_answered
    set_validity,   // the mutex is valid until `valid_until`, unless lost meanwhile: on_validity_set
    finish,         // finish with `error` (errc{}: success)
  };

  kind what = kind::nothing;
  errc error{};
  clock::time_point valid_until{};  // send_round (if cut_validity), set_validity
  bool cut_validity = false;
  bool mark_released = false;       // finish of an unlock: this acquisition is over
  bool drop_hold = false;           // finish of an unlock: one hold of a reentrant mutex taken, nothing sent
  bool release_everywhere = false;  // finish: release the keys just re-armed
};

class holder_steps {
 public:
  using clock = std::chrono::steady_clock;
  using step = holder_step;

  explicit holder_steps(holder_rules rules) : rules_(rules) {}

  // The call's turn came at `now`; `deadline` is its context's (an unlock
  // does not look at it).
  step start(clock::time_point now, clock::time_point deadline, const holder_facts& facts);
  // unlock: the release round reported; `lost`: the lost signal.
  step on_released(const tally& t, bool lost);
  // extend, check: the call is built; the round goes out at `now`.
  step on_round_ready(clock::time_point now);
  // extend, check: the round reported at `now`.
  step on_answered(const tally& t, clock::time_point now);
  // extend: the new validity was set, unless the lock was `lost`.
  step on_validity_set(bool lost);

  // unlock: whether it takes one hold of a reentrant mutex held more than
  // once, the lock still valid at `now`, instead of releasing. Also asked
  // at the turn of an unlock answered before it (cancelled, out of time).
  bool drops_a_hold(const holder_facts& facts, clock::time_point now) const noexcept {
    return rules_.call == holder_call::release && !rules_.every_hold && facts.has_value && facts.holds > 1 &&
           !facts.lost && !facts.let_go && now < facts.until;
  }

  bool extends() const noexcept {
    return rules_.call == holder_call::extend || rules_.call == holder_call::auto_extend;
  }

 private:
  enum class phase { not_started, preparing, round, setting_validity, done };

  step finish(errc why);

  const holder_rules rules_;
  phase phase_ = phase::not_started;
  clock::time_point round_start_{};
};

}  // namespace redsync::detail
