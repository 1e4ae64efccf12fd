// Acquiring a permit: the Redlock steps of the mutex (acquisition.cpp) with
// the semaphore's script and quorum:
//   1. note the start time; ask every node at once for a permit of one slot
//      (semaphore_scripts.hpp), after the first survey of the node records
//      (restart guard, node_trust.hpp);
//   2. a yes counts only if node_trust says the node votes;
//   3. quorum(): the fencing token is the winners' highest counter, written
//      back where a quorum does not hold it yet (fencing.hpp);
//   4. validity = expiry - elapsed - drift must be positive;
//   5. otherwise the attempt is undone on every node that may have granted
//      it (every node but those that refused), in order on the node's
//      connection, and the next attempt waits for the retry delay or for
//      wake-ups from a quorum of nodes.
// The fair line (rule F; permit_line.hpp): a blocking acquire is one
// waiter; a node grants it only while fewer live waiters are ahead than
// permits are free. An undo puts it back in line, quietly; a release wakes
// the one waiter it lets in; we try again once a quorum of nodes is open to
// us, and leave the line wherever we may be once confirmed or given up.
// try_acquire never queues: it is behind every waiter.
// A waiter whose attempts fail for want of counted votes, not only because
// permits are held, is woken at most once per try: a wake-up may not help.
// Each attempt uses a fresh permit id, so an undo or a late answer of one
// attempt can never touch the permit of another.

#include "redlock/semaphore/semaphore_acquisition.hpp"

#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/mutex/fencing.hpp"
#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/quorum.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "redlock/semaphore/permit_line.hpp"
#include "redlock/semaphore/slot_choice.hpp"
#include "util/value_generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <random>

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

class semaphore_acquisition final : public bounded_operation, public release_listener::waiter {
 public:
  semaphore_acquisition(std::shared_ptr<semaphore_state> st, bool blocking, context ctx,
                        std::function<void(acquire_result)> done)
      : bounded_operation(st->eng, std::move(ctx)),
        st_(std::move(st)),
        blocking_(blocking),
        done_(std::move(done)),
        line_(*st_, blocking) {}

  // A node woke us (a permit there is free for us now): once a quorum of
  // nodes is open to us, try again at once, for the freed slot.
  void on_release(std::size_t node, std::string_view slot) override {
    if (finished()) return;
    std::uint32_t s = 0;
    const auto [end, ec] = std::from_chars(slot.data(), slot.data() + slot.size(), s);
    if (ec == std::errc{} && end == slot.data() + slot.size() && s < static_cast<std::uint32_t>(st_->permits))
      freed_slot_ = s;
    line_.on_open(node);
    if (line_.quorum_open()) wake();
  }

  // The subscription is active: a release between our last refusal and now
  // was not heard, so look once more.
  void on_subscribed() override {
    if (looked_after_subscribing_) return;
    looked_after_subscribing_ = true;
    wake();
  }

 private:
  std::shared_ptr<semaphore_acquisition> self() {
    return std::static_pointer_cast<semaphore_acquisition>(shared_from_this());
  }

  void start() override {
    if (ctx_.deadline <= clock::now()) return finish(errc::deadline_exceeded);
    max_tries_ = blocking_ ? st_->opts.tries : 1;
    slot_ = random_slot();
    woken_ = false;
    attempt();
  }

  std::uint32_t k() const { return static_cast<std::uint32_t>(st_->permits); }

  std::uint32_t random_slot() {
    std::uniform_int_distribution<std::uint32_t> d(0, static_cast<std::uint32_t>(st_->permits) - 1);
    return d(eng_.rng());
  }

  // A try (of `tries`) is counted at most once per retry delay: attempts
  // made early on a wake-up are free, and so is one attempt per try on
  // another slot the answers showed free (`counted` false).
  void attempt(bool counted = true) {
    const auto now = clock::now();
    if (counted && (attempts_ == 0 || now >= try_due_)) {
      // With unlimited_tries (the largest int) the count stops one short
      // of it: it never overflows, and the tries never run out.
      if (attempts_ < unlimited_tries - 1) ++attempts_;
      switched_slot_ = false;
      woken_this_try_ = 0;
      milliseconds delay{0};
      if (attempts_ < max_tries_) {
        std::uniform_int_distribution<int> d(50, 249);  // [50 ms, 250 ms), as the mutex
        delay = st_->opts.retry_delay ? st_->opts.retry_delay(attempts_) : milliseconds{d(eng_.rng())};
      }
      try_due_ = now + delay;
    }
    waiting_for_survey_ = true;
    eng_.trust(st_->slot).when_surveyed(st_->timeout, [self = self()] { self->send_attempt(); });
  }

  void send_attempt() {
    waiting_for_survey_ = false;
    if (finished()) return;
    freed_slot_.reset();
    current_ = std::make_shared<permit_state>(st_, random_value(), slot_);
    answers_.others.assign(eng_.size(), {});
    answers_.open.assign(eng_.size(), false);
    stored_.assign(eng_.size(), 0);
    const std::string slot_text = std::to_string(slot_);
    line_.prepare_attempt(duration_cast<milliseconds>(try_due_ - clock::now()), attempts_ >= max_tries_);
    std::vector<std::string_view> args{current_->member, slot_text, st_->permits_text, st_->expiry_ms};
    for (const std::string_view a : line_.acquire_args()) args.push_back(a);
    args.push_back(st_->channel);
    const std::size_t channel_arg = args.size() - 1;
    const script_call call =
        st_->call(st_->count_only ? semaphore_acquire_count_only_script() : semaphore_acquire_script(),
                  semaphore_state::keys_of::acquire, std::move(args), channel_arg);
    line_.on_attempt_sent();
    // A fallback (EVAL after NOSCRIPT) sent after the round reported would
    // follow the undo on the connection and grant a permit nobody releases.
    round_spec spec = st_->round(
        call, classify_semaphore_acquire,
        [self = self(), round = rounds_reported_] {
          return !self->finished() && self->rounds_reported_ == round;
        },
        true);
    spec.other_kind = semaphore_held_as_mutex;
    spec.other_kind_why = st_->held_as_mutex;
    spec.send = [self = self(), send = std::move(spec.send), round = rounds_reported_](
                    std::size_t i, member_slot pool, command_callback done) {
      send(i, pool, [self, i, round, done = std::move(done)](command_result&& r) mutable {
        if (round == self->rounds_reported_ && r.status == transport_status::ok && !r.value.is_error())
          self->read_answer(i, r.value);
        done(std::move(r));
      });
    };
    spec.exclude_yes = [self = self()](std::size_t i, const reply& r, std::string_view served_by,
                                       const std::vector<node_result>& so_far, std::string& why) {
      return self->eng_.trust(self->st_->slot)
          .exclude_yes(i, r, served_by, self->st_->opts.expiry, so_far, why);
    };
    attempt_start_ = clock::now();
    in_round_ = true;
    run_round(eng_, std::move(spec), [self = self()](tally&& t) { self->on_attempt(std::move(t)); });
  }

  // Rule M: a node that stores another k answers an error naming both.
  void read_answer(std::size_t i, reply& r) {
    const auto a = read_semaphore_answer(r);
    // Held as a mutex there (rule X): no slot is open on that node.
    if (!a || a->held_as_mutex) return;
    if (a->stored_permits) {
      stored_[i] = *a->stored_permits;
      r.type = reply::kind::error;
      r.str = fmt::format("semaphore \"{}\" has {} permits on this node; this Semaphore was made with {}",
                          st_->name, *a->stored_permits, st_->permits);
      r.elements.clear();
      return;
    }
    answers_.others[i] = a->others;
    answers_.open[i] = a->open;
    // A permit is free for us there (an undone grant puts us back): no
    // wake-up from it is needed.
    if (a->open) line_.on_open(i);
  }

  void on_attempt(tally&& t) {
    ++rounds_reported_;
    in_round_ = false;
    if (finished()) return;
    last_ = std::move(t);
    const std::size_t q = st_->quorum;
    line_.on_attempt_answered(last_);
    if (last_.ok < q) return failed(acquire_failure(last_, eng_.size(), q));
    const token_votes votes = count_token_votes(last_, eng_.size());
    if (votes.at_token >= q) return acquired(votes.token);
    in_round_ = true;
    const std::string token_text = std::to_string(votes.token);
    const script_call fence =
        st_->call(semaphore_fence_script(), semaphore_state::keys_of::fence, {current_->member, token_text});
    write_back_token(eng_, st_->round(fence, classify_fence), q, votes,
                     [self = self(), token = votes.token](bool quorum_holds_token) {
                       self->in_round_ = false;
                       if (self->finished()) return;
                       if (quorum_holds_token) return self->acquired(token);
                       self->failed(errc::no_quorum);
                     });
  }

  void acquired(std::int64_t token) {
    const auto elapsed = duration_cast<microseconds>(clock::now() - attempt_start_);
    if (validity(st_->opts.expiry, elapsed, st_->drift) <= microseconds::zero())
      return failed(errc::validity_elapsed);
    current_->token = fencing_token{static_cast<std::uint64_t>(token)};
    current_->mark_granted(attempt_start_, attempt_start_ + st_->opts.expiry - st_->drift);
    finish({});
  }

  // Step 5: undo the attempt, then wait.
  void failed(errc why) {
    undo_everywhere(false);
    std::string reason;
    for (std::size_t i = 0; i < eng_.size(); ++i) {
      if (stored_[i] == 0) continue;
      reason += fmt::format("{}{} stores {}", reason.empty() ? "" : ", ", eng_.addresses()[i], stored_[i]);
    }
    if (!reason.empty())
      return finish(
          errc::permits_mismatch,
          fmt::format("semaphore \"{}\": this Semaphore was made with {} permits, but {} (the number "
                      "its live holders agreed on)",
                      st_->name, st_->permits, reason));
    // A wake-up can only help an attempt that held permits refused. When
    // the counted yeses and the refusals for a held permit fall short of a
    // quorum (nodes down, yeses excluded by the restart guard or the
    // failover check), no release would have made it; when some yes was
    // excluded, one may not either. Then woken attempts are rationed to one
    // per try, until an attempt on the client's own schedule is refused by
    // held permits alone.
    const bool releases_can_help = last_.ok + last_.taken >= st_->quorum;
    if (!releases_can_help || last_.excluded > 0)
      rationed_ = true;
    else if (!woken_)
      rationed_ = false;
    // Refused for the slot only, while the answers show another slot that
    // a quorum of nodes could grant: try it at once (once per try).
    const std::optional<std::uint32_t> open =
        releases_can_help ? open_slot(answers_, k(), slot_, st_->quorum, eng_.rng()) : std::nullopt;
    if (open && !switched_slot_) {
      switched_slot_ = true;
      slot_ = *open;
      return attempt(false);
    }
    if (attempts_ >= max_tries_) return finish(why);
    slot_ = open ? *open : least_taken_slot(answers_, k(), eng_.rng());
    bool missed = false;
    if (!listening_) {
      listening_ = true;
      // Another waiter of this process already had the subscription: no
      // on_subscribed() comes, and releases during our first attempt went
      // unheard, so we look once more at once (what on_subscribed does).
      missed = line_.listen(this) && !looked_after_subscribing_;
      if (missed) looked_after_subscribing_ = true;
    }
    if (!retry_timer_) retry_timer_ = loop_timer::create(eng_.loop().loop());
    if (may_wake() && (missed || line_.quorum_open())) return wake();
    const auto now = clock::now();
    const auto left = now >= try_due_ ? microseconds::zero() : duration_cast<microseconds>(try_due_ - now);
    retry_timer_->start(left, [this] {
      woken_ = false;
      attempt();
    });
  }

  // Every node that did not refuse may hold the attempt's permit (a node
  // that timed out may still run it): the undo goes to each, sent so that
  // it runs in its place on the node's connection (no fallback later), and
  // nobody waits for it (a hung node must not stall us). Tracked so that
  // shutdown waits for it. An attempt that joined the line puts us back in
  // it at our arrival, quietly; one that did not is undone as a release
  // (it wakes the waiter the freed permit lets in).
  // `all`: the attempt's round has not reported (last_ is an older one's).
  void undo_everywhere(bool all) {
    const script_call& undo = line_.undo_for(*current_);
    for (std::size_t i = 0; i < eng_.size(); ++i) {
      if (!all && last_.nodes[i].status == node_status::taken) continue;
      if (!eng_.can_send()) return;
      send_script_in_order(eng_.script_mode(), eng_.at(i, st_->slot), st_->route, undo, st_->timeout,
                           eng_.track_cleanup([](command_result&&) {}));
    }
  }

  bool may_wake() const { return !rationed_ || woken_this_try_ == 0; }

  void wake() {
    if (finished() || in_round_ || waiting_for_survey_ || !retry_timer_ || !may_wake()) return;
    if (freed_slot_) slot_ = *freed_slot_;
    // A wake-up names one waiter per freed permit: no spread is needed.
    retry_timer_->start(microseconds::zero(), [this] {
      woken_ = true;
      ++woken_this_try_;
      attempt();
    });
  }

  // Deadline, cancellation or shutdown with an attempt in flight: its
  // permit may be granted anywhere.
  void on_abandon() override {
    if (in_round_ && current_) undo_everywhere(true);
  }

  void on_finish(errc why) override {
    if (retry_timer_) {
      retry_timer_->close();
      retry_timer_ = nullptr;
    }
    if (listening_) line_.stop_listening(this);
    listening_ = false;
    // Confirmed: where a node granted our permit the grant took us out of
    // its line; elsewhere we may still be in it. Given up: everywhere.
    if (why == errc{} && !last_.nodes.empty()) {
      std::vector<bool> won(eng_.size(), false);
      for (std::size_t i = 0; i < eng_.size(); ++i) won[i] = last_.nodes[i].status == node_status::ok;
      line_.leave(&won);
    } else {
      line_.leave(nullptr);
    }
  }

  void report(result r) override {
    acquire_result out;
    const bool ok = r.ok();
    eng_.telemetry().permit_acquisition(*st_, current_.get(), blocking_, r);
    out.outcome = std::move(r);
    if (ok) out.permit = permit_state::wrap(current_);
    if (done_) done_(std::move(out));
  }

  const std::shared_ptr<semaphore_state> st_;
  const bool blocking_;
  std::function<void(acquire_result)> done_;
  std::shared_ptr<permit_state> current_;  // the attempt's permit
  std::uint32_t slot_ = 0;                 // the next attempt's slot
  slot_answers answers_;                   // the last attempt's, per node
  std::vector<long long> stored_;          // per node: its k where it differs (rule M), else 0
  permit_line line_;
  std::optional<std::uint32_t> freed_slot_;
  std::uint64_t rounds_reported_ = 0;
  int max_tries_ = 1;
  clock::time_point try_due_{};
  clock::time_point attempt_start_{};
  loop_timer* retry_timer_ = nullptr;
  bool listening_ = false;
  bool waiting_for_survey_ = false;
  bool looked_after_subscribing_ = false;
  bool switched_slot_ = false;  // this try already moved to an open slot
  bool woken_ = false;          // the current attempt was made because releases were heard
  bool rationed_ = false;       // one woken attempt per try (see failed())
  int woken_this_try_ = 0;      // woken attempts since the last counted try
};

}  // namespace

void submit_acquisition(std::shared_ptr<semaphore_state> st, bool blocking, const context& ctx,
                        std::function<void(acquire_result)> done) {
  std::make_shared<semaphore_acquisition>(std::move(st), blocking, ctx, std::move(done))->submit();
}

}  // namespace redsync::detail
