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
//      releases heard from a quorum of nodes.
// The undo of an attempt the client made on its own schedule (its first, or
// one after its retry delay) announces the freed slot as a release does:
// its grants may have refused waiters, who would otherwise sleep their whole
// retry delay while the permit is free. The undo of an attempt made because
// a release was heard is quiet (so is the slot switch that follows it). So
// no wake-up chain: every announcement comes from a release or from a
// self-scheduled attempt, whose rate the callers choose (a call's first
// attempt, then at most two per retry delay: the attempt and one on another
// open slot), and a failed woken attempt announces nothing. A waiter whose
// attempts fail for want of counted votes, not only because permits are
// held, is woken at most once per try: a release may not help it.
// Each attempt uses a fresh permit id, so an undo or a late answer of one
// attempt can never touch the permit of another.

#include "redlock/semaphore/semaphore_acquisition.hpp"

#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/mutex/fencing.hpp"
#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/quorum.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "util/value_generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <random>
#include <set>

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// Waiters woken by one release start within this window, uniformly spread,
// so the first usually finds the freed slot on every node before the next
// arrives (a round trip on a LAN is far shorter), instead of all of them
// taking a few nodes each and undoing.
constexpr milliseconds wake_spread{20};

class semaphore_acquisition final : public bounded_operation, public release_listener::waiter {
 public:
  semaphore_acquisition(std::shared_ptr<semaphore_state> st, bool blocking, context ctx,
                        std::function<void(acquire_result)> done)
      : bounded_operation(st->eng, std::move(ctx)),
        st_(std::move(st)),
        blocking_(blocking),
        done_(std::move(done)) {}

  // A node announced a release: once a quorum of nodes has since our last
  // attempt, try again now (after a short spread), for the freed slot.
  void on_release(std::size_t node, std::string_view slot) override {
    if (finished()) return;
    std::uint32_t s = 0;
    const auto [end, ec] = std::from_chars(slot.data(), slot.data() + slot.size(), s);
    if (ec == std::errc{} && end == slot.data() + slot.size() && s < static_cast<std::uint32_t>(st_->permits))
      freed_slot_ = s;
    heard_.insert(node);
    if (heard_.size() >= st_->quorum) wake();
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
    heard_.clear();
    freed_slot_.reset();
    current_ = std::make_shared<permit_state>(st_, random_value(), slot_);
    others_.assign(eng_.size(), {});
    answered_.assign(eng_.size(), false);
    stored_.assign(eng_.size(), 0);
    const std::string slot_text = std::to_string(slot_);
    const script_call call = st_->call(
        st_->count_only ? semaphore_acquire_count_only_script() : semaphore_acquire_script(),
        semaphore_state::keys_of::acquire, {current_->member, slot_text, st_->permits_text, st_->expiry_ms});
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
    others_[i] = a->others;
    answered_[i] = true;
  }

  void on_attempt(tally&& t) {
    ++rounds_reported_;
    in_round_ = false;
    if (finished()) return;
    last_ = std::move(t);
    const std::size_t q = st_->quorum;
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
    // A release can only help an attempt that held permits refused. When
    // the counted yeses and the refusals for a held permit fall short of a
    // quorum (nodes down, or yeses excluded by the restart guard or the
    // failover check), no release or other slot would have made it; when
    // some yes was excluded, a release may not either. Then wake-ups are
    // rationed to one per try, until an attempt on the client's own
    // schedule is refused by held permits alone: otherwise every
    // self-scheduled undo would wake every other waiter for a free attempt
    // that fails the same way (16 waiters on nodes in their guard window:
    // 6.6 acquire scripts per counted try).
    const bool releases_can_help = last_.ok + last_.taken >= st_->quorum;
    if (!releases_can_help || last_.excluded > 0)
      rationed_ = true;
    else if (!woken_)
      rationed_ = false;
    // Refused for the slot only, while the answers show another slot that
    // a quorum of nodes could grant: try it at once (once per try).
    const std::optional<std::uint32_t> open = releases_can_help ? open_slot() : std::nullopt;
    if (open && !switched_slot_) {
      switched_slot_ = true;
      slot_ = *open;
      return attempt(false);
    }
    if (attempts_ >= max_tries_) return finish(why);
    slot_ = open ? *open : least_taken_slot();
    bool missed = false;
    if (!listening_) {
      listening_ = true;
      // Another waiter of this process already had the subscription: no
      // on_subscribed() comes, and releases during our first attempt went
      // unheard, so we look once more at once (what on_subscribed does).
      missed = eng_.listener().watch(st_->channel, this, st_->cluster_channel) && !looked_after_subscribing_;
      if (missed) looked_after_subscribing_ = true;
    }
    if (!retry_timer_) retry_timer_ = loop_timer::create(eng_.loop().loop());
    if (may_wake() && (missed || heard_.size() >= st_->quorum)) return wake();
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
  // shutdown waits for it. Announced unless the attempt was woken (see the
  // top of this file); a node announces only if it held the permit.
  // `all`: the attempt's round has not reported (last_ is an older one's).
  void undo_everywhere(bool all) {
    const script_call& undo = woken_ ? current_->undo_call : current_->release_call;
    for (std::size_t i = 0; i < eng_.size(); ++i) {
      if (!all && last_.nodes[i].status == node_status::taken) continue;
      if (!eng_.can_send()) return;
      send_script_in_order(eng_.script_mode(), eng_.at(i, st_->slot), st_->route, undo, st_->timeout,
                           eng_.track_cleanup([](command_result&&) {}));
    }
  }

  // The slot the fewest nodes said is taken (ties at random); a slot a
  // release announced since is preferred by wake().
  std::uint32_t least_taken_slot() {
    std::vector<std::size_t> taken(static_cast<std::size_t>(st_->permits), 0);
    for (const auto& listed : others_)
      for (const std::uint32_t s : listed)
        if (s < taken.size()) ++taken[s];
    const std::size_t least = *std::min_element(taken.begin(), taken.end());
    std::vector<std::uint32_t> best;
    for (std::uint32_t s = 0; s < taken.size(); ++s)
      if (taken[s] == least) best.push_back(s);
    std::uniform_int_distribution<std::size_t> d(0, best.size() - 1);
    return best[d(eng_.rng())];
  }

  // A slot other than the one just tried that enough nodes could grant:
  // they answered, hold fewer than k other permits, none on that slot.
  std::optional<std::uint32_t> open_slot() {
    const auto k = static_cast<std::size_t>(st_->permits);
    std::vector<std::size_t> could(k, 0);
    for (std::size_t i = 0; i < eng_.size(); ++i) {
      if (!answered_[i] || others_[i].size() >= k) continue;
      std::vector<bool> taken(k, false);
      for (const std::uint32_t s : others_[i])
        if (s < k) taken[s] = true;
      for (std::size_t s = 0; s < k; ++s)
        if (!taken[s]) ++could[s];
    }
    std::vector<std::uint32_t> best;
    for (std::uint32_t s = 0; s < k; ++s)
      if (s != slot_ && could[s] >= st_->quorum) best.push_back(s);
    if (best.empty()) return std::nullopt;
    std::uniform_int_distribution<std::size_t> d(0, best.size() - 1);
    return best[d(eng_.rng())];
  }

  bool may_wake() const { return !rationed_ || woken_this_try_ == 0; }

  void wake() {
    if (finished() || in_round_ || waiting_for_survey_ || !retry_timer_ || !may_wake()) return;
    if (freed_slot_) slot_ = *freed_slot_;
    std::uniform_int_distribution<std::int64_t> d(0, duration_cast<microseconds>(wake_spread).count());
    retry_timer_->start(microseconds{d(eng_.rng())}, [this] {
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

  void on_finish(errc) override {
    if (retry_timer_) {
      retry_timer_->close();
      retry_timer_ = nullptr;
    }
    if (listening_) eng_.listener().unwatch(st_->channel, this);
    listening_ = false;
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
  std::shared_ptr<permit_state> current_;           // the attempt's permit
  std::uint32_t slot_ = 0;                          // the next attempt's slot
  std::vector<std::vector<std::uint32_t>> others_;  // per node: the other permits' slots
  std::vector<bool> answered_;                      // per node: others_ is its answer
  std::vector<long long> stored_;                   // per node: its k where it differs (rule M), else 0
  std::set<std::size_t> heard_;                     // nodes that announced a release since our last attempt
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
