#pragma once

// The decisions of a Mutex's acquisition (acquisition.cpp), without I/O:
// told what happened (plain values, the time passed in, never read here),
// it answers with the next step. The driver does the step (rounds, timers,
// the waiting line, node trust) and reports back. So the Redlock rules can
// be driven in every order with made-up answers, without a server
// (tests/unit/redlock/acquisition_steps_test.cpp), as Boost.Redis tests
// its exec_fsm.
//
// Phases and the events that move them (any other event is ignored and
// answered with `nothing`):
//
//   not_started --start--> claiming --on_claimed--> preparing | done
//   preparing --on_surveyed--> attempt_round
//   attempt_round --on_attempt_answered--> counting_votes | undo_round
//   counting_votes --on_token_votes--> done | write_back_round | undo_round
//   write_back_round --on_token_written--> done | undo_round
//   undo_round --on_undo_finished--> preparing | done | listening
//   listening --on_listening--> waiting_for_retry
//   waiting_for_retry --on_retry_due, on_quorum_opened, on_subscribed--> preparing
//
// Invariants (each pinned by a test):
//  - `acquired` only after an attempt answered by a quorum of counted yes,
//    whose token a quorum holds (at once, or after the write-back), and
//    while validity = expiry - elapsed - drift is positive, elapsed counted
//    from that attempt's start on the monotonic clock;
//  - after a failed attempt, every node that said yes (counted or not) and
//    every node that may still apply the SET (timed out, dropped, not
//    awaited, answered an error) gets an undo; only the ones that answered
//    yes are awaited, so a hung node never stalls the retry;
//  - at most `tries` counted tries, a try counted at most once per retry
//    delay; the retry after a refused transaction is not counted;
//  - a re-entry (mutex_options::reentrant) sends nothing: it finishes at the
//    claim, with success only while the lock is still valid.

#include "redlock/engine/tally.hpp"

#include <redsync/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace redsync::detail {

// What the mutex said when asked to take an acquisition's value
// (mutex_state::claim).
enum class claim_outcome {
  claimed,          // it took the value: the attempts follow
  held,             // it holds the lock, not for us to re-enter: already_held
  reentered,        // the owner re-entered a reentrant mutex, still valid: one more hold
  reentry_lost,     // the owner's re-entry, but the lock was lost: lost
  reentry_expired,  // the owner's re-entry, but its validity has passed: expired
};

// What an acquisition needs to know to decide: its mutex's options, as
// numbers.
struct acquisition_rules {
  std::size_t nodes = 1;
  std::size_t quorum = 1;
  // Counted tries: mutex_options::tries for lock(), 1 for try_lock().
  int tries = 1;
  std::chrono::milliseconds expiry{0};
  std::chrono::microseconds drift{0};  // quorum.hpp's drift(expiry, drift_factor)
  // The delay before try `try_number + 1` (try_number from 1): the mutex's
  // retry_delay, or the library's random default.
  std::function<std::chrono::milliseconds(int try_number)> retry_delay{};
};

// The next thing the driver does.
struct acquisition_step {
  using clock = std::chrono::steady_clock;

  enum class kind {
    nothing,            // the event changes nothing (out of turn, or ignored)
    claim_value,        // take the value on the mutex (begin_acquisition), then on_claimed
    prepare_attempt,    // prepare the line's calls, wait for every node's first look, then on_surveyed
    send_attempt,       // the acquire script (or the transaction) to every node at once
    count_token_votes,  // read the winners' counters, then on_token_votes
    write_back_token,   // raise the counter to `token` where a winner is below it, then on_token_written
    undo,               // undo the failed attempt, then on_undo_finished
    listen,             // hear releases of our names, then on_listening
    wait_for_retry,     // arm the retry timer, then on_retry_due (or a wake-up)
    acquired,           // mark the mutex acquired and finish
    reentered,          // finish with success: the claim added a hold, nothing is sent
    failed,             // finish with `error`
  };

  kind what = kind::nothing;
  // prepare_attempt, wait_for_retry: until the next counted try is due,
  // rounded up (a wait that ends early would start an uncounted attempt).
  std::chrono::milliseconds until_try{0};
  // prepare_attempt: no attempt follows this one (it does not join the line).
  bool final_try = false;
  // send_attempt: the first attempt, which may go as the transaction.
  bool first_attempt = false;
  // wait_for_retry: look again without waiting (a wake-up opened a quorum,
  // or releases during the attempt went unheard).
  bool at_once = false;
  // undo: per node, in the undo round we wait for (nodes that said yes)...
  std::vector<bool> undo_awaited{};
  // ...and per node, sent in order on its connection and not waited for.
  std::vector<bool> undo_unawaited{};
  // write_back_token, acquired: the fencing token.
  std::int64_t token = 0;
  // acquired: the start of the winning attempt and the end of its validity.
  clock::time_point attempt_start{};
  clock::time_point valid_until{};
  // failed: why.
  errc error{};
};

class acquisition_steps {
 public:
  using clock = std::chrono::steady_clock;
  using step = acquisition_step;

  enum class phase {
    not_started,
    claiming,
    preparing,
    attempt_round,
    counting_votes,
    write_back_round,
    undo_round,
    listening,
    waiting_for_retry,
    done,
  };

  explicit acquisition_steps(acquisition_rules rules);

  // ---- events ----
  // The operation's turn came at `now`; `deadline` is its context's.
  step start(clock::time_point now, clock::time_point deadline);
  // What the mutex said to our value.
  step on_claimed(claim_outcome claim, clock::time_point now);
  // Whether the mutex took our value (false: it already holds one).
  step on_claimed(bool claimed, clock::time_point now) {
    return on_claimed(claimed ? claim_outcome::claimed : claim_outcome::held, now);
  }
  // Every node's record was looked at: the attempt goes out at `now`, the
  // start of its validity.
  step on_surveyed(clock::time_point now);
  // A node answered the transaction with an error: the script from now on,
  // and one retry at once that is not counted as a try. Any phase.
  void on_transaction_refused();
  // The attempt's round reported.
  step on_attempt_answered(const tally& t);
  // The winners' counters: the highest, and how many winners hold it.
  step on_token_votes(std::int64_t token, std::size_t at_token, clock::time_point now);
  // The write-back reported.
  step on_token_written(bool quorum_holds_token, clock::time_point now);
  // The undo round reported (or there was nothing to await).
  step on_undo_finished(clock::time_point now);
  // We hear releases now; `already_subscribed`: another waiter of this
  // process had the subscription, so releases during the attempt went
  // unheard; `quorum_open`: wake-ups heard meanwhile opened a quorum.
  step on_listening(bool already_subscribed, bool quorum_open, clock::time_point now);
  // The retry timer fired.
  step on_retry_due(clock::time_point now);
  // A wake-up opened a quorum of nodes to us (waiting_line::on_release).
  step on_quorum_opened(clock::time_point now);
  // Our release channels' subscription was confirmed.
  step on_subscribed(clock::time_point now);

  // ---- state the driver reads ----
  phase current() const noexcept { return phase_; }
  // A round of ours is in flight (attempt, write-back or undo): abandoning
  // now must release on every node.
  bool round_in_flight() const noexcept;
  // Tries counted so far (reported in the result).
  int tries_counted() const noexcept { return tries_; }

 private:
  step attempt_due(clock::time_point now);
  step check_validity(std::int64_t token, clock::time_point now);
  step undo_failed_attempt(errc why);
  std::chrono::milliseconds until_try_due(clock::time_point now) const;

  // The network-free test starts a machine near the unlimited_tries cap,
  // which driving there would take 2^31 attempts (acquisition_steps_test.cpp).
  friend struct acquisition_steps_test_access;

  const acquisition_rules rules_;
  phase phase_ = phase::not_started;
  int tries_ = 0;
  clock::time_point try_due_{};  // when the next counted try is due
  clock::time_point attempt_start_{};
  std::int64_t token_ = 0;            // the winners' token, while it is written back
  std::vector<node_status> answers_;  // the last attempt's, per node
  errc failure_ = errc::no_quorum;
  bool sent_an_attempt_ = false;
  bool transaction_refused_ = false;
  bool retried_with_script_ = false;
  bool looked_after_subscribing_ = false;
};

}  // namespace redsync::detail
