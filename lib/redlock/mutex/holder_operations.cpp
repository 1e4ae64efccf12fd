// Release, extend and check: one round each of a compare-and-act script on
// every node, a quorum deciding. What the answers mean, and whether a call
// may go out at all, is holder_steps'; this file carries it out.

#include "redlock/mutex/holder_operations.hpp"

#include "redlock/mutex/holder_steps.hpp"
#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/quorum.hpp"
#include "redlock/scripts/script_answers.hpp"

#include <algorithm>
#include <cassert>
#include <string>

namespace redsync::detail {

using holder_kind = holder_step::kind;

namespace {

using std::chrono::microseconds;

// What a call reports when it stops on `s`. Only a finish step carries a
// verdict; any other step where the driver expected one of its own means
// the steps answered out of turn (a bug): never success, which would claim
// a quorum nobody gave. no_quorum claims nothing about who holds the lock,
// and leaves a retried unlock possible.
errc verdict_of(const holder_step& s) {
  assert(s.what == holder_kind::finish);
  return s.what == holder_kind::finish ? s.error : errc::no_quorum;
}

holder_rules holder_rules_of(const mutex_state& st, const engine& eng, holder_call call,
                             std::chrono::milliseconds duration, microseconds drift,
                             bool every_hold = false) {
  return {.nodes = eng.size(),
          .quorum = eng.quorum(),
          .call = call,
          .expiry = st.opts.expiry,
          .duration = duration,
          .drift = drift,
          .every_hold = every_hold};
}

// Unlock. The release is sent before the context is looked at: cleanup is
// never skipped because a deadline passed or the caller cancelled. On a
// reentrant mutex held more than once, an unlock takes one hold instead
// and sends nothing (holder_steps::drops_a_hold); whether it does is only
// known at its turn, after the re-entries queued before it.
class release_operation final : public mutex_operation {
 public:
  release_operation(std::shared_ptr<mutex_state> st, context ctx, std::function<void(result)> done,
                    bool every_hold)
      : mutex_operation(std::move(st), std::move(ctx), std::move(done)),
        every_hold_(every_hold),
        steps_(holder_rules_of(*st_, eng_, holder_call::release, st_->opts.expiry, st_->drift, every_hold)) {}

  // Cleanup still goes out at shutdown (the engine waits for its replies,
  // bounded by shutdown_timeout): an unlock not sent yet is sent now.
  void on_shutdown() override {
    if (!release_sent_ && !finished()) release_everywhere();
    abandon(errc::shutting_down);
  }

 private:
  // The watchdog stops before the release is queued: no automatic extension
  // can run after it and re-create the key. A reentrant mutex's inner unlock
  // must leave it running, so there it stops when the release goes out
  // (let_go): an automatic extension queued behind the release then finds
  // it stopped and sends nothing (holder_steps::start).
  void before_queue() override {
    if (st_->wd && !st_->opts.reentrant) st_->wd->stop();
  }

  // A release still runs while the engine shuts down: a Mutex destroyed just
  // before its Redsync posts one, and the engine waits for it.
  bool may_start() const override { return eng_.can_send(); }

  // Cancelled or out of time before its turn: the caller has let go already
  // (held() is false when the call returns); the release follows below. An
  // inner unlock of a reentrant mutex leaves the lock held: its turn takes
  // the hold.
  void on_abandon() override {
    if (steps_.drops_a_hold(facts(), clock::now())) return;
    if (st_->opts.reentrant && st_->wd) st_->wd->stop();
    std::lock_guard lk(st_->mu);
    st_->held = false;
  }

  // An unlock already answered (cancelled, or out of time, while it waited
  // its turn) still releases, or takes its hold.
  void on_turn_after_finish() override {
    if (release_sent_ || !eng_.can_send()) return;
    if (steps_.drops_a_hold(facts(), clock::now())) return drop_hold();
    release_everywhere();
  }

  void start() override {
    const auto next = steps_.start(clock::now(), ctx_.deadline, facts());
    if (next.what == holder_kind::finish && next.drop_hold) {
      drop_hold();
      return finish(verdict_of(next));
    }
    let_go();
    if (next.what != holder_kind::send_release) return finish(verdict_of(next));
    in_round_ = true;
    round_spec spec = release_round(*st_);
    spec.send = retried_release_sender(*st_);
    run_round(eng_, std::move(spec), [self = shared_from_this(), this](tally&& t) {
      in_round_ = false;
      if (!finished()) on_released(std::move(t));
    });
  }

  void on_released(tally&& t) {
    last_ = std::move(t);
    const auto done = steps_.on_released(last_, st_->lost.stop_requested());
    if (done.what == holder_kind::finish && done.mark_released) {
      std::lock_guard lk(st_->mu);
      st_->released = true;
    }
    finish(verdict_of(done));
  }

  // The mutex as the unlock's turn comes, read under its lock.
  holder_facts facts() const {
    holder_facts f{.has_value = st_->has_value(true)};
    std::lock_guard lk(st_->mu);
    f.lost = st_->lost.stop_requested();
    f.let_go = !st_->held;
    f.holds = st_->holds;
    f.until = st_->until;
    return f;
  }

  // Reentrant: one of the holds owed let go, with nothing sent (the lock
  // stays as it is, or was released by an earlier unlock).
  void drop_hold() {
    dropped_hold_ = true;
    std::lock_guard lk(st_->mu);
    if (st_->holds > 0) --st_->holds;
  }

  // The caller lets go: from here held() is false, whatever the release's
  // outcome, so a new lock() acquires afresh (for a reentrant mutex, once no
  // hold is owed: this unlock pays one, the destructor all; its watchdog
  // stops now, see before_queue). The value is kept (and `released` stays
  // false until a quorum confirmed it), so a repeated unlock still releases
  // it.
  void let_go() {
    release_sent_ = true;
    if (st_->opts.reentrant && st_->wd) st_->wd->stop();
    std::lock_guard lk(st_->mu);
    st_->held = false;
    if (every_hold_ || st_->holds == 0)
      st_->holds = 0;
    else
      --st_->holds;
  }

  // An unlock nobody waits for (shutdown, or its caller already answered).
  void release_everywhere() {
    let_go();
    if (st_->has_value(true)) release_everywhere_retried(*st_);
  }

  // An inner unlock sent nothing: not counted, not observed (as a re-entry).
  void on_outcome(const result& r) override {
    if (!dropped_hold_) eng_.telemetry().release(*st_, r);
  }

  const bool every_hold_;  // the destructor's release: every hold goes with it
  holder_steps steps_;
  bool release_sent_ = false;
  bool dropped_hold_ = false;
};

// Extend (by hand or automatic) or check: compare our value on every name,
// then act (PEXPIRE) or only report.
class holder_round final : public mutex_operation {
 public:
  holder_round(std::shared_ptr<mutex_state> st, op_kind kind, context ctx, std::function<void(result)> done,
               std::chrono::milliseconds duration)
      : mutex_operation(std::move(st), std::move(ctx), std::move(done), kind != op_kind::auto_extend),
        kind_(kind),
        duration_(duration > std::chrono::milliseconds::zero() ? duration : st_->opts.expiry),
        drift_(duration_ == st_->opts.expiry ? st_->drift : drift(duration_, st_->opts.drift_factor)),
        steps_(holder_rules_of(*st_, eng_, call_of(kind), duration_, drift_)) {}

 private:
  bool extends() const noexcept { return kind_ != op_kind::check; }
  // extend(duration) with a duration other than the expiry.
  bool own_duration() const noexcept { return duration_ != st_->opts.expiry; }

  static holder_call call_of(op_kind kind) {
    return kind == op_kind::check         ? holder_call::check
           : kind == op_kind::auto_extend ? holder_call::auto_extend
                                          : holder_call::extend;
  }

  // What the steps need to know of the mutex as the call's turn comes.
  holder_facts facts() const {
    holder_facts f{.has_value = st_->has_value(false), .watchdog_active = st_->wd && st_->wd->active()};
    std::lock_guard lk(st_->mu);
    f.lost = st_->lost.stop_requested();
    f.let_go = st_->released || !st_->held;
    return f;
  }

  void start() override {
    const auto next = steps_.start(clock::now(), ctx_.deadline, facts());
    if (next.what != holder_kind::prepare_round) return finish(verdict_of(next));
    if (extends()) {
      if (!st_->extend_call) {
        st_->extend_call =
            st_->call(st_->scripts.extend, &lock_keys::keys,
                      {st_->value_snapshot(), st_->expiry_ms, st_->opts.set_nx_on_extend ? "1" : "0"}, false);
      }
    }
    const script_call own_call = extends() && own_duration()
                                     ? st_->call(st_->scripts.extend, &lock_keys::keys,
                                                 {st_->value_snapshot(), std::to_string(duration_.count()),
                                                  st_->opts.set_nx_on_extend ? "1" : "0"},
                                                 false)
                                     : script_call{};
    round_spec spec;
    if (extends()) {
      // An extension with set_nx_on_extend may SET: no fallback once the
      // round reported and the unlock may be queued behind it. On a cluster
      // member its yes needs the failover check (mutex_rounds.hpp).
      spec = mutex_round_without_sender(*st_, classify_three_way);
      spec.send =
          failover_checked_sender(*st_, own_duration() ? own_call : st_->extend_call, classify_three_way,
                                  [self = shared_from_this(), this] { return in_round_ && !finished(); });
    } else {
      spec =
          mutex_round(*st_, st_->call(st_->scripts.check, &lock_keys::keys, {st_->value_snapshot()}, false),
                      classify_three_way);
    }
    attempts_ = 1;
    // A shorter TTL than the keys have: the validity is cut before anything
    // is sent (holder_steps.cpp says why).
    const auto send = steps_.on_round_ready(clock::now());
    if (send.what != holder_kind::send_round) return finish(verdict_of(send));
    if (send.cut_validity) {
      std::lock_guard lk(st_->mu);
      st_->until = std::min(st_->until, send.valid_until);
    }
    in_round_ = true;
    run_round(eng_, std::move(spec), [self = shared_from_this(), this](tally&& t) {
      in_round_ = false;
      if (!finished()) on_round(std::move(t));
    });
  }

  void on_round(tally&& t) {
    last_ = std::move(t);
    auto next = steps_.on_answered(last_, clock::now());
    if (next.what == holder_kind::set_validity) {
      // The loss is read and the validity set at once: a loss reported in
      // between must not be overwritten by a fresh validity.
      bool lost = false;
      {
        std::lock_guard lk(st_->mu);
        lost = st_->lost.stop_requested();
        if (!lost) st_->until = next.valid_until;
      }
      next = steps_.on_validity_set(lost);
    }
    if (next.what == holder_kind::finish && next.release_everywhere) release_everywhere_retried(*st_);
    finish(verdict_of(next));
  }

  // A check is not counted, nor an automatic extension that found the
  // watchdog already stopped (nothing was sent).
  void on_outcome(const result& r) override {
    if (kind_ == op_kind::check || (kind_ == op_kind::auto_extend && r.error == errc::not_held)) return;
    eng_.telemetry().extension(*st_, kind_ == op_kind::auto_extend, r);
  }

  const op_kind kind_;
  // The TTL this extension sets (the expiry, or extend(duration)'s), and
  // the drift allowance over it: the validity is duration - elapsed - drift.
  const std::chrono::milliseconds duration_;
  const microseconds drift_;
  holder_steps steps_;
};

}  // namespace

std::shared_ptr<mutex_operation> make_release(std::shared_ptr<mutex_state> st, context ctx,
                                              std::function<void(result)> done, bool every_hold) {
  return std::make_shared<release_operation>(std::move(st), std::move(ctx), std::move(done), every_hold);
}

std::shared_ptr<mutex_operation> make_extension(std::shared_ptr<mutex_state> st, bool automatic, context ctx,
                                                std::function<void(result)> done,
                                                std::chrono::milliseconds duration) {
  return std::make_shared<holder_round>(std::move(st), automatic ? op_kind::auto_extend : op_kind::extend,
                                        std::move(ctx), std::move(done), duration);
}

std::shared_ptr<mutex_operation> make_check(std::shared_ptr<mutex_state> st, context ctx,
                                            std::function<void(result)> done) {
  return std::make_shared<holder_round>(std::move(st), op_kind::check, std::move(ctx), std::move(done),
                                        std::chrono::milliseconds::zero());
}

}  // namespace redsync::detail
