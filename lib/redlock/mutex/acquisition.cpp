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
// Queueing, deadline, cancellation and shutdown are mutex_operation's.

#include "redlock/mutex/acquisition.hpp"

#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/mutex/fencing.hpp"
#include "redlock/mutex/group_votes.hpp"
#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/mutex/slot_groups.hpp"
#include "redlock/mutex/waiting_line.hpp"
#include "redlock/quorum.hpp"
#include "redlock/scripts/fast_acquire.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "redlock/trust/durable_wait.hpp"

#include <algorithm>
#include <optional>
#include <random>

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

milliseconds default_retry_delay(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(50, 249);  // [50 ms, 250 ms), as redsync
  return milliseconds{d(rng)};
}

class acquisition final : public mutex_operation, public release_listener::waiter {
 public:
  acquisition(std::shared_ptr<mutex_state> st, bool blocking, context ctx, std::string value,
              std::function<void(result)> done)
      : mutex_operation(std::move(st), std::move(ctx), std::move(done)),
        blocking_(blocking),
        value_(std::move(value)) {}

  // Waiting line: a node reserved the lock for us. Once a quorum of nodes
  // has, try now instead of sleeping out the wait: one attempt per
  // hand-over, not one that races the release across the nodes and wins a
  // minority. With our own attempt in flight, the wake-ups are counted for
  // after it (after_failed_attempt).
  void on_release(std::size_t node, std::string_view next_in_line) override {
    if (finished() || next_in_line != value_) return;
    if (!line_->on_release(node)) return;
    if (in_round_ || waiting_for_survey_ || !retry_timer_) return;
    retry_timer_->stop();
    attempt();
  }

  // Waiting line: once per wait, one look closes the gap between our
  // refusal and the subscription (every node confirms; once is enough): a
  // release in that gap was not heard.
  void on_subscribed() override {
    if (looked_after_subscribing_) return;
    if (finished() || in_round_ || waiting_for_survey_ || !retry_timer_) return;
    looked_after_subscribing_ = true;
    retry_timer_->stop();
    attempt();
  }

 private:
  // Rounded up: a wait truncated to whole milliseconds ended up to 1 ms
  // before the try was due, so the attempt it started did not count as a
  // try, and an extra round went to every node (seen under load:
  // lock_test's "exactly `tries` attempts").
  milliseconds until_try_due(clock::time_point now) const {
    return now >= try_due_ ? milliseconds::zero() : std::chrono::ceil<milliseconds>(try_due_ - now);
  }

  std::shared_ptr<acquisition> self() { return std::static_pointer_cast<acquisition>(shared_from_this()); }

  // Not reentrant: a second acquisition by the same holder would replace
  // the value and strand the keys it holds until they expire.
  void start() override {
    // Background retries of an earlier release stop before this acquisition
    // can put the same value (a fixed mutex_options::value) back.
    ++st_->generation;
    if (ctx_.deadline <= clock::now()) return finish(errc::deadline_exceeded);
    if (!st_->begin_acquisition(value_)) return finish(errc::already_held);
    line_.emplace(*st_, value_, blocking_);
    votes_.emplace(*st_);
    max_tries_ = blocking_ ? st_->opts.tries : 1;
    // Durable mode: WAIT behind every script (durable_wait.hpp); the
    // transaction is not used then.
    durable_ = durable_spec_of(st_->opts, st_->timeout);
    if (st_->names.size() == 1 && !durable_)
      fast_wire_ = encode_fast_acquire(st_->name, value_, st_->expiry_ms);
    attempt();
  }

  // A try (of `tries`) is counted at most once per retry delay: attempts in
  // between (a wake-up, a waiter refreshing its place in line) are free.
  // The delay is chosen when a try starts, so the lease we take in the
  // waiting line covers the wait after it.
  void attempt() {
    const auto now = clock::now();
    if (attempts_ == 0 || now >= try_due_) {
      // With unlimited_tries (the largest int) the count stops one short
      // of it: it never overflows, and the tries never run out.
      if (attempts_ < unlimited_tries - 1) ++attempts_;
      retry_delay_ = milliseconds::zero();
      if (attempts_ < max_tries_)
        retry_delay_ =
            st_->opts.retry_delay ? st_->opts.retry_delay(attempts_) : default_retry_delay(eng_.rng());
      try_due_ = now + retry_delay_;
    }
    line_->prepare_attempt(until_try_due(now), attempts_ >= max_tries_);
    // Restart guard: the first acquisition of this Redsync waits until every
    // node's record was looked at (for each slot of the names on a cluster
    // member); later ones go at once.
    waiting_for_survey_ = true;
    const auto surveyed = [this](std::uint16_t slot) { return eng_.trust(slot).surveyed(); };
    if (!st_->slots.empty() && std::all_of(st_->slots.begin(), st_->slots.end(), surveyed))
      return send_attempt();  // what the countdown below would do at once, without its allocations
    auto left = std::make_shared<std::size_t>(st_->slots.size());
    for (const std::uint16_t slot : st_->slots)
      eng_.trust(slot).when_surveyed(st_->timeout, [self = self(), left] {
        if (--*left == 0) self->send_attempt();
      });
  }

  // Redlock steps 1 and 2: note the start time, then SET NX PX (inside the
  // acquire script) on every node at once.
  void send_attempt() {
    waiting_for_survey_ = false;
    if (finished()) return;
    line_->on_attempt_sent();
    attempt_start_ = clock::now();
    in_round_ = true;
    votes_->clear();
    round_spec spec = mutex_round_without_sender(*st_, classify_acquire);
    // Waiting line: the last fail_fast report left open whether we reach a
    // quorum; this attempt's complete answers decide (waiting_line.cpp).
    if (line_->awaits_every_node()) spec.fail_fast = false;
    // One call per slot group on a cluster member, whose groups make one
    // all-or-nothing vote (group_votes.hpp).
    spec.send = [self = self(), wanted = answer_awaited()](std::size_t i, member_slot pool,
                                                           command_callback done) {
      acquisition& a = *self;
      a.line_->on_script_sent(i);
      send_to_member(
          pool, a.line_->call_for(i), a.st_->slots,
          [&a, &wanted](member_slot to, const script_call& form, command_callback d) {
            // Durable mode, and on a cluster member the failover check
            // (durable_wait.hpp): a WAIT behind the script.
            if (const durable_spec spec = wait_needed(a.durable_, to, a.st_->timeout))
              return send_script_durable(a.eng_.script_mode(), to, a.st_->route, form, a.st_->timeout,
                                         std::move(d), wanted, spec, classify_acquire);
            send_script(a.eng_.script_mode(), to, a.st_->route, form, a.st_->timeout, std::move(d), wanted);
          },
          [self, i](std::vector<command_result>&& groups) {
            return self->votes_->combine(i, std::move(groups));
          },
          std::move(done));
    };
    if (!sent_an_attempt_ && fast_wire_) spec.send = fast_sender(std::move(spec.send));
    sent_an_attempt_ = true;
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

  // Whether this attempt's answers are still awaited: not once its round
  // reported or the acquisition finished, when the attempt's release may
  // already be queued on the node's connection (script_call.hpp).
  fallback_wanted answer_awaited() {
    return [self = self(), round = rounds_reported_] {
      return !self->finished() && self->rounds_reported_ == round;
    };
  }

  // Step 2 without a script where it can (fast_acquire.hpp): the first
  // attempt of a single-name lock sends the transaction to every node whose
  // recorded window covers our expiry, and the acquire script (`script`) to
  // the others. Where the transaction's SET NX lost and we wait, the script
  // follows on the same connection within the command timeout's remainder,
  // so we join the line there; unless the round has reported by then: a
  // release sent after the report must not be overtaken by a later SET.
  round_sender fast_sender(round_sender script) {
    return [self = self(), script = std::move(script), round = rounds_reported_](
               std::size_t i, member_slot pool, command_callback done) mutable {
      acquisition& a = *self;
      // The transaction names the standalone record: a cluster member
      // always gets the script.
      if (pool.is_cluster() || !a.eng_.trust(a.st_->slot).window_covers(i, a.st_->opts.expiry))
        return script(i, pool, std::move(done));
      auto on_exec = [self, round, i, pool, done = std::move(done)](command_result&& r) mutable {
        acquisition& a = *self;
        // Finished (abandoned, or shut down with an engine that may be gone
        // by now): nothing below is wanted, and the engine must not be used.
        if (a.finished()) return done(std::move(r));
        if (r.status == transport_status::ok) r.value = fast_acquire_answer(std::move(r.value));
        if (r.status == transport_status::ok && r.value.is_error()) {
          // This node cannot run the transaction (an ACL written before it
          // existed, say): the script from now on, and one more attempt at
          // once that does not count as a try.
          a.eng_.trust(a.st_->slot).transaction_refused(i);
          a.transaction_refused_ = true;
          // An EXEC the server does not know (renamed away, or a proxy that
          // refuses it) leaves the connection inside MULTI, where every
          // later command, our release included, would only be QUEUED.
          // DISCARD ends it there, before the release this error leads to.
          // An EXEC refused by the ACL ends the transaction itself
          // (EXECABORT), so a user without +discard is not asked for it.
          if (r.value.str.find("unknown command") != std::string::npos)
            pool.send(a.st_->route, discard_command(), a.st_->timeout, [](command_result&&) {});
        }
        const bool lost = r.status == transport_status::ok && r.value.type == reply::kind::nil;
        const auto left = a.st_->timeout - r.latency;
        if (!lost || !a.blocking_ || a.finished() || a.rounds_reported_ != round ||
            left <= microseconds::zero())
          return done(std::move(r));
        a.line_->on_script_sent(i);
        send_script(
            a.eng_.script_mode(), pool, a.st_->route, a.line_->call_for(i), left,
            [first = r.latency, done = std::move(done)](command_result&& joined) {
              joined.latency += first;
              done(std::move(joined));
            },
            a.answer_awaited());
      };
      pool.send(a.st_->route, a.fast_wire_, a.st_->timeout, std::move(on_exec), fast_acquire_replies);
    };
  }

  // Redlock step 3: a quorum of yes votes, or the attempt failed.
  void on_attempt(tally&& t) {
    ++rounds_reported_;
    in_round_ = false;
    if (finished()) return;  // abandoned: the release already went out
    last_ = std::move(t);
    line_->on_attempt_answered(last_);
    if (last_.ok < eng_.quorum())
      return release_failed_attempt(acquire_failure(last_, eng_.size(), eng_.quorum()));
    // Fencing: the token is the winners' highest counter; unless a quorum
    // already holds it, it is written back first (fencing.hpp).
    token_votes votes = count_token_votes(last_, eng_.size());
    votes_->note_floors(last_, votes);
    if (votes.at_token >= eng_.quorum()) return acquired(votes.token);
    in_round_ = true;
    write_back_token(*st_, value_, votes, [self = self(), token = votes.token](bool quorum_holds_token) {
      self->in_round_ = false;
      if (self->finished()) return;
      if (quorum_holds_token) return self->acquired(token);
      self->release_failed_attempt(errc::no_quorum);
    });
  }

  // Redlock step 4: validity = expiry - elapsed - drift, measured on the
  // monotonic clock from the start of this attempt; none left is a failure.
  void acquired(std::int64_t token) {
    const auto elapsed = duration_cast<microseconds>(clock::now() - attempt_start_);
    if (validity(st_->opts.expiry, elapsed, st_->drift) <= microseconds::zero())
      return release_failed_attempt(errc::validity_elapsed);
    st_->mark_acquired(attempt_start_ + st_->opts.expiry - st_->drift,
                       fencing_token{static_cast<std::uint64_t>(token)});
    if (st_->wd) st_->wd->start(attempt_start_);
    // Confirmed: only now do we leave the lines (rule L).
    line_->leave();
    finish({});
  }

  // Redlock step 5: undo a failed attempt, with the release script in undo
  // mode (scripts.hpp, rule U): it keeps our place in line, and a name we
  // won as the head goes back to being reserved for us, never to the waiter
  // behind us. Nodes that answered "taken" did not apply our SET and need
  // nothing (a cluster member answering per slot group undid its groups
  // when it answered: group_votes.hpp). Nodes that said yes (counted or excluded) get an undo we wait
  // for (they are responsive, so this costs one round trip). Nodes that
  // timed out, dropped, or were not awaited may still apply the SET later:
  // they get an undo too, in order on the same connection
  // (send_undo_unawaited), so the server runs it after the SET; we do not
  // wait for those, a hung node must not stall us. So do nodes that answered
  // an error: a script is not rolled back when it fails part-way (say, the
  // fencing counter holds the wrong type after our SET ran), so the key may
  // be ours there even though the node said no.
  void release_failed_attempt(errc why) {
    failure_ = why;
    std::vector<bool> skip(eng_.size(), true);
    bool any_awaited = false;
    for (std::size_t i = 0; i < eng_.size(); ++i) {
      switch (last_.nodes[i].status) {
        case node_status::ok:
        case node_status::excluded:  // it said yes (and answered); its vote just did not count
          skip[i] = false;
          any_awaited = true;
          break;
        case node_status::timeout:
        case node_status::unreachable:
        case node_status::not_awaited:
        case node_status::reply_error: send_undo_unawaited(*st_, i); break;
        default: break;
      }
    }
    if (!any_awaited) return after_failed_attempt();
    in_round_ = true;
    round_spec spec = undo_round(*st_);
    spec.fail_fast = false;
    spec.excluded = std::move(skip);
    run_round(eng_, std::move(spec), [self = self()](tally&&) {
      self->in_round_ = false;
      if (!self->finished()) self->after_failed_attempt();
    });
  }

  // Redlock step 6: retry after the delay, unless the tries are used up. A
  // blocking lock waits in line meanwhile, hearing releases of its names.
  void after_failed_attempt() {
    if (transaction_refused_ && !retried_with_script_) {
      // The failed attempt's release went out on each node's connection
      // before this retry, so it runs first there. It does not count as a
      // try.
      retried_with_script_ = true;
      --attempts_;
      try_due_ = clock::time_point{};
      return attempt();
    }
    if (attempts_ >= max_tries_) return finish(failure_);
    // Another waiter of this process already had the names' subscription:
    // no on_subscribed() comes, and releases during our attempt went
    // unheard, so we look once more at once (what on_subscribed does).
    const bool missed = line_->listen(this) && !looked_after_subscribing_;
    if (missed) looked_after_subscribing_ = true;
    if (!retry_timer_) retry_timer_ = loop_timer::create(eng_.loop().loop());
    // Wake-ups heard during the attempt: if they opened a quorum, at once.
    const auto delay = missed || line_->quorum_open() ? milliseconds::zero()
                                                      : line_->wait_after(until_try_due(clock::now()));
    retry_timer_->start(duration_cast<microseconds>(delay), [this] { attempt(); });
  }

  // Deadline, cancellation or shutdown: with a round in flight our SET may
  // land on any node, so every node gets the (retried) release.
  void on_abandon() override {
    if (in_round_) release_everywhere_retried(*st_);
  }

  void on_finish(errc why) override {
    if (retry_timer_) {
      retry_timer_->close();
      retry_timer_ = nullptr;
    }
    if (!line_) return;
    line_->stop_listening(this);
    if (why != errc{}) line_->leave();
  }

  // Observability: counters and the observer's on_acquire (telemetry.hpp).
  void on_outcome(const result& r) override { eng_.telemetry().acquisition(*st_, blocking_, r); }

  const bool blocking_;
  const std::string value_;
  wire_command fast_wire_;  // the transaction, for a single-name lock
  durable_spec durable_;    // from start(): off unless mutex_options::durable_replicas
  std::uint64_t rounds_reported_ = 0;
  bool transaction_refused_ = false;  // some node answered the transaction with an error
  bool retried_with_script_ = false;
  std::optional<waiting_line> line_;  // from start(): the arrival is taken when our turn comes
  std::optional<group_votes> votes_;  // from start()
  loop_timer* retry_timer_ = nullptr;
  int max_tries_ = 1;
  bool sent_an_attempt_ = false;  // the transaction is for the first attempt only
  milliseconds retry_delay_{0};   // before the next counted try
  clock::time_point try_due_{};   // when the next counted try is due
  bool waiting_for_survey_ = false;
  bool looked_after_subscribing_ = false;
  errc failure_ = errc::no_quorum;
  clock::time_point attempt_start_{};
};

}  // namespace

std::shared_ptr<mutex_operation> make_acquisition(std::shared_ptr<mutex_state> st, bool blocking, context ctx,
                                                  std::string value, std::function<void(result)> done) {
  return std::make_shared<acquisition>(std::move(st), blocking, std::move(ctx), std::move(value),
                                       std::move(done));
}

}  // namespace redsync::detail
