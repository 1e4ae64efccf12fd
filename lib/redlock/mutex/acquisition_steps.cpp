// The Redlock acquisition's decisions: tries and retry delays, quorum,
// token votes, validity, which nodes get an undo, when to finish with what.

#include "redlock/mutex/acquisition_steps.hpp"

#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/quorum.hpp"

#include <redsync/retries.hpp>

#include <utility>

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using step_kind = acquisition_step::kind;

acquisition_steps::acquisition_steps(acquisition_rules rules) : rules_(std::move(rules)) {}

bool acquisition_steps::round_in_flight() const noexcept {
  return phase_ == phase::attempt_round || phase_ == phase::write_back_round || phase_ == phase::undo_round;
}

acquisition_step acquisition_steps::start(clock::time_point now, clock::time_point deadline) {
  if (phase_ != phase::not_started) return {};
  if (deadline <= now) {
    phase_ = phase::done;
    return {.what = step_kind::failed, .error = errc::deadline_exceeded};
  }
  phase_ = phase::claiming;
  return {.what = step_kind::claim_value};
}

// A second acquisition by the same holder is never sent: it would replace
// the value and strand the keys it holds until they expire. Unless the
// mutex is reentrant and the owner asks, it is refused; a re-entry adds a
// hold to the acquisition in force, which only its validity vouches for, so
// it fails once that is over rather than succeed on a lock nobody holds.
acquisition_step acquisition_steps::on_claimed(claim_outcome claim, clock::time_point now) {
  if (phase_ != phase::claiming) return {};
  if (claim == claim_outcome::claimed) return attempt_due(now);
  phase_ = phase::done;
  switch (claim) {
    case claim_outcome::reentered: return {.what = step_kind::reentered};
    case claim_outcome::reentry_lost: return {.what = step_kind::failed, .error = errc::lost};
    case claim_outcome::reentry_expired: return {.what = step_kind::failed, .error = errc::expired};
    case claim_outcome::claimed:
    case claim_outcome::held: break;
  }
  return {.what = step_kind::failed, .error = errc::already_held};
}

// Rounded up: a wait truncated to whole milliseconds ended up to 1 ms
// before the try was due, so the attempt it started did not count as a
// try, and an extra round went to every node (seen under load: lock_test's
// "exactly `tries` attempts").
milliseconds acquisition_steps::until_try_due(clock::time_point now) const {
  return now >= try_due_ ? milliseconds::zero() : std::chrono::ceil<milliseconds>(try_due_ - now);
}

// A try (of `tries`) is counted at most once per retry delay: attempts in
// between (a wake-up, a waiter refreshing its place in line) are free. The
// delay is chosen when a try starts, so the lease the attempt takes in the
// waiting line covers the wait after it.
acquisition_step acquisition_steps::attempt_due(clock::time_point now) {
  if (tries_ == 0 || now >= try_due_) {
    // With unlimited_tries (the largest int) the count stops one short of
    // it: it never overflows, and the tries never run out.
    if (tries_ < unlimited_tries - 1) ++tries_;
    milliseconds delay = milliseconds::zero();
    if (tries_ < rules_.tries) delay = rules_.retry_delay(tries_);
    try_due_ = now + delay;
  }
  phase_ = phase::preparing;
  return {.what = step_kind::prepare_attempt,
          .until_try = until_try_due(now),
          .final_try = tries_ >= rules_.tries};
}

// Redlock steps 1 and 2: note the start time, then SET NX PX on every node
// at once. The transaction is for the first attempt only
// (fast_acquire.hpp).
acquisition_step acquisition_steps::on_surveyed(clock::time_point now) {
  if (phase_ != phase::preparing) return {};
  phase_ = phase::attempt_round;
  attempt_start_ = now;
  const bool first = !sent_an_attempt_;
  sent_an_attempt_ = true;
  return {.what = step_kind::send_attempt, .first_attempt = first};
}

void acquisition_steps::on_transaction_refused() {
  transaction_refused_ = true;
}

// Redlock step 3: a quorum of yes votes, or the attempt failed.
acquisition_step acquisition_steps::on_attempt_answered(const tally& t) {
  if (phase_ != phase::attempt_round) return {};
  answers_.assign(rules_.nodes, node_status::not_awaited);
  for (std::size_t i = 0; i < rules_.nodes && i < t.nodes.size(); ++i) answers_[i] = t.nodes[i].status;
  if (t.ok < rules_.quorum) return undo_failed_attempt(acquire_failure(t, rules_.nodes, rules_.quorum));
  phase_ = phase::counting_votes;
  return {.what = step_kind::count_token_votes};
}

// Fencing: the token is the winners' highest counter; unless a quorum
// already holds it, it is written back first (fencing.hpp).
acquisition_step acquisition_steps::on_token_votes(std::int64_t token, std::size_t at_token,
                                                   clock::time_point now) {
  if (phase_ != phase::counting_votes) return {};
  if (at_token >= rules_.quorum) return check_validity(token, now);
  phase_ = phase::write_back_round;
  token_ = token;
  return {.what = step_kind::write_back_token, .token = token};
}

acquisition_step acquisition_steps::on_token_written(bool quorum_holds_token, clock::time_point now) {
  if (phase_ != phase::write_back_round) return {};
  if (quorum_holds_token) return check_validity(token_, now);
  return undo_failed_attempt(errc::no_quorum);
}

// Redlock step 4: validity = expiry - elapsed - drift, measured on the
// monotonic clock from the start of this attempt; none left is a failure.
acquisition_step acquisition_steps::check_validity(std::int64_t token, clock::time_point now) {
  const auto elapsed = duration_cast<microseconds>(now - attempt_start_);
  if (validity(rules_.expiry, elapsed, rules_.drift) <= microseconds::zero())
    return undo_failed_attempt(errc::validity_elapsed);
  phase_ = phase::done;
  return {.what = step_kind::acquired,
          .token = token,
          .attempt_start = attempt_start_,
          .valid_until = attempt_start_ + rules_.expiry - rules_.drift};
}

// Redlock step 5: undo a failed attempt. Nodes that answered "taken" did
// not apply our SET and need nothing. Nodes that said yes (counted or
// excluded) get an undo we wait for: they are responsive, so this costs
// one round trip. Nodes that timed out, dropped, or were not awaited may
// still apply the SET later: they get an undo too, in order on the same
// connection, so the server runs it after the SET; we do not wait for
// those, a hung node must not stall us. So do nodes that answered an
// error: a script is not rolled back when it fails part-way (say, the
// fencing counter holds the wrong type after our SET ran), so the key may
// be ours there even though the node said no.
acquisition_step acquisition_steps::undo_failed_attempt(errc why) {
  failure_ = why;
  phase_ = phase::undo_round;
  step undo{.what = step_kind::undo};
  undo.undo_awaited.assign(rules_.nodes, false);
  undo.undo_unawaited.assign(rules_.nodes, false);
  for (std::size_t i = 0; i < rules_.nodes; ++i) {
    switch (answers_[i]) {
      case node_status::ok:
      case node_status::excluded:  // it said yes (and answered); its vote just did not count
        undo.undo_awaited[i] = true;
        break;
      case node_status::timeout:
      case node_status::unreachable:
      case node_status::not_awaited:
      case node_status::reply_error: undo.undo_unawaited[i] = true; break;
      default: break;
    }
  }
  return undo;
}

// Redlock step 6: retry after the delay, unless the tries are used up.
acquisition_step acquisition_steps::on_undo_finished(clock::time_point now) {
  if (phase_ != phase::undo_round) return {};
  if (transaction_refused_ && !retried_with_script_) {
    // The failed attempt's undo went out on each node's connection before
    // this retry, so it runs first there. It does not count as a try.
    retried_with_script_ = true;
    --tries_;
    try_due_ = clock::time_point{};
    return attempt_due(now);
  }
  if (tries_ >= rules_.tries) {
    phase_ = phase::done;
    return {.what = step_kind::failed, .error = failure_};
  }
  phase_ = phase::listening;
  return {.what = step_kind::listen};
}

// Another waiter of this process already had the names' subscription: no
// on_subscribed comes, and releases during our attempt went unheard, so we
// look once more at once (what on_subscribed does). Wake-ups heard during
// the attempt: if they opened a quorum, at once too.
acquisition_step acquisition_steps::on_listening(bool already_subscribed, bool quorum_open,
                                                 clock::time_point now) {
  if (phase_ != phase::listening) return {};
  const bool missed = already_subscribed && !looked_after_subscribing_;
  if (missed) looked_after_subscribing_ = true;
  phase_ = phase::waiting_for_retry;
  return {
      .what = step_kind::wait_for_retry, .until_try = until_try_due(now), .at_once = missed || quorum_open};
}

acquisition_step acquisition_steps::on_retry_due(clock::time_point now) {
  if (phase_ != phase::waiting_for_retry) return {};
  return attempt_due(now);
}

// Waiting line: once a quorum of nodes reserved the lock for us, try now
// instead of sleeping out the wait: one attempt per hand-over, not one that
// races the release across the nodes and wins a minority. With our own
// attempt in flight, the wake-ups are counted for after it (on_listening).
acquisition_step acquisition_steps::on_quorum_opened(clock::time_point now) {
  return on_retry_due(now);
}

// Waiting line: once per acquisition, one look closes the gap between our
// refusal and the subscription (every node confirms; once is enough): a
// release in that gap was not heard.
acquisition_step acquisition_steps::on_subscribed(clock::time_point now) {
  if (looked_after_subscribing_ || phase_ != phase::waiting_for_retry) return {};
  looked_after_subscribing_ = true;
  return attempt_due(now);
}

}  // namespace redsync::detail
