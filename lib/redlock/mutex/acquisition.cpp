// Acquiring a Mutex: the Redlock algorithm of the Redis distributed-lock
// spec, step by step (start time, the SET on every node at once, quorum,
// validity = expiry - elapsed - drift, release on failure, retry after a
// random delay), with our three additions layered on at named points:
//   - restart guard: the attempt waits for the first look at every node's
//     record, and a yes from a node whose vote does not count yet is
//     `excluded` (node_trust.hpp);
//   - fencing: the token is read from the winners, and written back when a
//     quorum does not hold it yet (fencing.hpp);
//   - fair waiting line: the script's line arguments, our place after each
//     attempt, and an early retry when a release names us (waiting_line.hpp).
// Every decision (tries and delays, quorum, token, validity, which nodes
// get an undo, when to finish with what) is acquisition_steps'; this file
// does what it decides and tells it what came of it. Queueing, deadline,
// cancellation and shutdown are mutex_operation's.

#include "redlock/mutex/acquisition.hpp"

#include "redlock/mutex/acquisition_operation.hpp"
#include "redlock/scripts/script_answers.hpp"

#include <algorithm>
#include <random>

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using step_kind = acquisition_step::kind;

namespace {

milliseconds default_retry_delay(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(50, 249);  // [50 ms, 250 ms), as redsync
  return milliseconds{d(rng)};
}

// The mutex's options as the steps need them. The delay is asked of the
// mutex's own option (a callable keeps its state there), or drawn from the
// engine's generator.
acquisition_rules rules_of(const mutex_state& st, bool blocking, engine& eng) {
  acquisition_rules r{.nodes = eng.size(),
                      .quorum = eng.quorum(),
                      .tries = blocking ? st.opts.tries : 1,
                      .expiry = st.opts.expiry,
                      .drift = st.drift};
  if (st.opts.retry_delay)
    r.retry_delay = [&opts = st.opts](int try_number) { return opts.retry_delay(try_number); };
  else
    r.retry_delay = [&eng](int) { return default_retry_delay(eng.rng()); };
  return r;
}

}  // namespace

std::shared_ptr<mutex_operation> make_acquisition(std::shared_ptr<mutex_state> st, bool blocking, context ctx,
                                                  std::string value, std::function<void(result)> done,
                                                  std::thread::id caller) {
  return std::make_shared<acquisition>(std::move(st), blocking, std::move(ctx), std::move(value),
                                       std::move(done), caller);
}

acquisition::acquisition(std::shared_ptr<mutex_state> st, bool blocking, context ctx, std::string value,
                         std::function<void(result)> done, std::thread::id caller)
    : mutex_operation(std::move(st), std::move(ctx), std::move(done)),
      blocking_(blocking),
      value_(std::move(value)),
      caller_(caller),
      steps_(rules_of(*st_, blocking, eng_)) {}

// Does what the steps decided; each step reports back to them.
void acquisition::act(const acquisition_step& next) {
  attempts_ = steps_.tries_counted();
  switch (next.what) {
    case step_kind::nothing: return;
    case step_kind::claim_value: return claim_value();
    case step_kind::prepare_attempt: return prepare_attempt(next);
    case step_kind::send_attempt: return send_attempt(next.first_attempt);
    case step_kind::count_token_votes: return count_token_votes();
    case step_kind::write_back_token: return write_back_token();
    case step_kind::undo: return undo(next);
    case step_kind::listen: return listen();
    case step_kind::wait_for_retry: return wait_for_retry(next);
    case step_kind::acquired: return acquired(next);
    case step_kind::reentered: return finish({});
    case step_kind::failed: return finish(next.error);
  }
}

void acquisition::start() {
  // Background retries of an earlier release stop before this acquisition
  // can put the same value (a fixed mutex_options::value) back.
  ++st_->generation;
  act(steps_.start(clock::now(), ctx_.deadline));
}

// A reentrant mutex's owner re-entering gets its hold here, or learns the
// lock is gone (mutex_state::claim): nothing is sent either way.
void acquisition::claim_value() {
  const claim_outcome claim = st_->claim(value_, caller_);
  reentry_ = claim == claim_outcome::reentered || claim == claim_outcome::reentry_lost ||
             claim == claim_outcome::reentry_expired;
  if (claim == claim_outcome::claimed) {
    line_.emplace(*st_, value_, blocking_);
    votes_.emplace(*st_);
    // Durable mode: WAIT behind every script (durable_wait.hpp); the
    // transaction is not used then.
    durable_ = durable_spec_of(st_->opts, st_->timeout);
    if (st_->names.size() == 1 && !durable_ && st_->scripts.transaction)
      fast_wire_ = encode_fast_acquire(st_->name, value_, st_->expiry_ms);
  }
  act(steps_.on_claimed(claim, clock::now()));
}

// A try's lease in the waiting line covers the wait after it. Restart
// guard: the first acquisition of this Redsync waits until every node's
// record was looked at (for each slot of the names on a cluster member);
// later ones go at once.
void acquisition::prepare_attempt(const acquisition_step& next) {
  line_->prepare_attempt(next.until_try, next.final_try);
  const auto surveyed = [this](std::uint16_t slot) { return eng_.trust(slot).surveyed(); };
  if (!st_->slots.empty() && std::all_of(st_->slots.begin(), st_->slots.end(), surveyed))
    return on_surveyed();  // what the countdown below would do at once, without its allocations
  auto left = std::make_shared<std::size_t>(st_->slots.size());
  for (const std::uint16_t slot : st_->slots)
    eng_.trust(slot).when_surveyed(st_->timeout, [self = self(), left] {
      if (--*left == 0) self->on_surveyed();
    });
}

void acquisition::on_surveyed() {
  if (!finished()) act(steps_.on_surveyed(clock::now()));
}

// Redlock steps 1 and 2: the start time is noted (by the steps), then SET
// NX PX (inside the acquire script) on every node at once.
void acquisition::send_attempt(bool first_attempt) {
  line_->on_attempt_sent();
  votes_->clear();
  round_spec spec = mutex_round_without_sender(*st_, classify_acquire);
  // Waiting line: the last fail_fast report left open whether we reach a
  // quorum; this attempt's complete answers decide (waiting_line.cpp).
  if (line_->awaits_every_node()) spec.fail_fast = false;
  spec.send = script_sender();
  if (first_attempt && fast_wire_) spec.send = fast_sender(std::move(spec.send));
  // Restart guard: a yes from a node whose vote does not count yet is
  // reported as `excluded` and not counted.
  spec.exclude_yes = [self = self(), expiry = st_->opts.expiry](
                         std::size_t i, const reply& r, std::string_view served_by,
                         const std::vector<node_result>& so_far, std::string& why) {
    self->line_->on_won(i, acquire_answer_in_line(r));
    return self->votes_->exclude_yes(i, r, served_by, expiry, so_far, why);
  };
  run_round(eng_, std::move(spec), [self = self()](tally&& t) { self->on_attempt(std::move(t)); });
}

// Redlock step 3: the steps judge the attempt's answers.
void acquisition::on_attempt(tally&& t) {
  ++rounds_reported_;
  if (finished()) return;  // abandoned: the release already went out
  last_ = std::move(t);
  line_->on_attempt_answered(last_);
  act(steps_.on_attempt_answered(last_));
}

// Fencing: the token is the winners' highest counter (fencing.hpp); a
// member that answered per slot group is at the token only if every group
// is (group_votes.hpp). Unless a quorum holds it, it is written back.
void acquisition::count_token_votes() {
  token_votes_ = detail::count_token_votes(last_, eng_.size());
  votes_->note_floors(last_, token_votes_);
  act(steps_.on_token_votes(token_votes_.token, token_votes_.at_token, clock::now()));
}

void acquisition::write_back_token() {
  detail::write_back_token(*st_, value_, token_votes_, [self = self()](bool quorum_holds_token) {
    if (!self->finished()) self->act(self->steps_.on_token_written(quorum_holds_token, clock::now()));
  });
}

// Redlock step 4 passed (validity = expiry - elapsed - drift is positive):
// the lock is ours until the validity's end.
void acquisition::acquired(const acquisition_step& won) {
  st_->mark_acquired(won.valid_until, fencing_token{static_cast<std::uint64_t>(won.token)}, caller_);
  if (st_->wd) st_->wd->start(won.attempt_start);
  // Confirmed: only now do we leave the lines (rule L).
  line_->leave();
  finish({});
}

// Redlock step 5: undo a failed attempt, with the release script in undo
// mode (scripts.hpp, rule U): it keeps our place in line, and a name we won
// as the head goes back to being reserved for us, never to the waiter
// behind us. The nodes we do not wait for get theirs in order on the
// connection of the attempt (send_undo_unawaited), so the server runs it
// after the SET it may still apply. A cluster member answering per slot
// group undid its groups when it answered (group_votes.hpp).
void acquisition::undo(const acquisition_step& failed) {
  for (std::size_t i = 0; i < eng_.size(); ++i)
    if (failed.undo_unawaited[i]) send_undo_unawaited(*st_, i);
  const auto& awaited = failed.undo_awaited;
  if (std::none_of(awaited.begin(), awaited.end(), [](bool b) { return b; }))
    return act(steps_.on_undo_finished(clock::now()));
  round_spec spec = undo_round(*st_);
  spec.fail_fast = false;
  spec.excluded.resize(eng_.size());
  for (std::size_t i = 0; i < eng_.size(); ++i) spec.excluded[i] = !awaited[i];
  run_round(eng_, std::move(spec), [self = self()](tally&&) {
    if (!self->finished()) self->act(self->steps_.on_undo_finished(clock::now()));
  });
}

// Redlock step 6, between tries: a blocking lock waits in line, hearing
// releases of its names.
void acquisition::listen() {
  const bool already_subscribed = line_->listen(this);
  act(steps_.on_listening(already_subscribed, line_->quorum_open(), clock::now()));
}

void acquisition::wait_for_retry(const acquisition_step& next) {
  if (!retry_timer_) retry_timer_ = loop_timer::create(eng_.loop().loop());
  const auto delay = next.at_once ? milliseconds::zero() : line_->wait_after(next.until_try);
  retry_timer_->start(duration_cast<microseconds>(delay), [this] { act(steps_.on_retry_due(clock::now())); });
}

// Waiting line: a node reserved the lock for us. Once a quorum of nodes has,
// the steps may have us try now instead of sleeping out the wait.
void acquisition::on_release(std::size_t node, std::string_view next_in_line) {
  if (finished() || next_in_line != value_) return;
  if (line_->on_release(node)) try_before_timer(steps_.on_quorum_opened(clock::now()));
}

// Waiting line: our channels' subscription is confirmed; the steps may have
// us look once, for a release between our refusal and the subscription.
void acquisition::on_subscribed() {
  if (!finished()) try_before_timer(steps_.on_subscribed(clock::now()));
}

void acquisition::try_before_timer(const acquisition_step& next) {
  if (next.what == step_kind::nothing) return;
  retry_timer_->stop();
  act(next);
}

// Deadline, cancellation or shutdown: with a round in flight our SET may
// land on any node, so every node gets the (retried) release.
void acquisition::on_abandon() {
  if (steps_.round_in_flight()) release_everywhere_retried(*st_);
}

void acquisition::on_finish(errc why) {
  if (retry_timer_) {
    retry_timer_->close();
    retry_timer_ = nullptr;
  }
  if (!line_) return;
  line_->stop_listening(this);
  if (why != errc{}) line_->leave();
}

// Observability: counters and the observer's on_acquire (telemetry.hpp).
// A re-entry is not an acquisition: nothing went to the nodes, so neither
// the counters nor the observer hear of it (docs/api.md, "Reentrancy").
void acquisition::on_outcome(const result& r) {
  if (reentry_) return;
  eng_.telemetry().acquisition(*st_, blocking_, r);
}

}  // namespace redsync::detail
