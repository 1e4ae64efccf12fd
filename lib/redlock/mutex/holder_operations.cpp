// Release, extend and check: one round each of a compare-and-act script on
// every node, a quorum deciding.

#include "redlock/mutex/holder_operations.hpp"

#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/quorum.hpp"
#include "redlock/scripts/script_answers.hpp"

#include <algorithm>
#include <string>

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

// Unlock. The release is sent before the context is looked at: cleanup is
// never skipped because a deadline passed or the caller cancelled.
class release_operation final : public mutex_operation {
 public:
  using mutex_operation::mutex_operation;

  // Cleanup still goes out at shutdown (the engine waits for its replies,
  // bounded by shutdown_timeout): an unlock not sent yet is sent now.
  void on_shutdown() override {
    if (!release_sent_ && !finished()) release_everywhere();
    abandon(errc::shutting_down);
  }

 private:
  // The watchdog stops before the release is queued: no automatic extension
  // can run after it and re-create the key.
  void before_queue() override {
    if (st_->wd) st_->wd->stop();
  }

  // A release still runs while the engine shuts down: a Mutex destroyed just
  // before its Redsync posts one, and the engine waits for it.
  bool may_start() const override { return eng_.can_send(); }

  // Cancelled or out of time before its turn: the caller has let go already
  // (held() is false when the call returns); the release follows below.
  void on_abandon() override {
    std::lock_guard lk(st_->mu);
    st_->held = false;
  }

  // An unlock already answered (cancelled, or out of time, while it waited
  // its turn) still releases.
  void on_turn_after_finish() override {
    if (!release_sent_ && eng_.can_send()) release_everywhere();
  }

  void start() override {
    let_go();
    if (!st_->has_value(true)) return finish(errc::not_held);
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
    const bool ok = last_.ok >= eng_.quorum();
    errc why = ok ? errc{} : holder_failure(last_, eng_.quorum());
    // The keys are released either way; the caller must still learn that
    // the lock had been lost while they thought they held it.
    if (st_->lost.stop_requested()) why = errc::lost;
    // Released, or known to be gone (expired/taken on a quorum): this
    // acquisition is over either way. After no_quorum it may still be on
    // some nodes, so a retried unlock must still be possible.
    if (ok || why != errc::no_quorum) {
      std::lock_guard lk(st_->mu);
      st_->released = true;
    }
    finish(why);
  }

  // The caller lets go: from here held() is false, whatever the release's
  // outcome, so a new lock() acquires afresh. The value is kept (and
  // `released` stays false until a quorum confirmed it), so a repeated
  // unlock still releases it.
  void let_go() {
    release_sent_ = true;
    std::lock_guard lk(st_->mu);
    st_->held = false;
  }

  // An unlock nobody waits for (shutdown, or its caller already answered).
  void release_everywhere() {
    let_go();
    if (st_->has_value(true)) release_everywhere_retried(*st_);
  }

  void on_outcome(const result& r) override { eng_.telemetry().release(*st_, r); }

  bool release_sent_ = false;
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
        drift_(duration_ == st_->opts.expiry ? st_->drift : drift(duration_, st_->opts.drift_factor)) {}

 private:
  bool extends() const noexcept { return kind_ != op_kind::check; }
  // extend(duration) with a duration other than the expiry.
  bool own_duration() const noexcept { return duration_ != st_->opts.expiry; }

  void start() override {
    // The watchdog stopped (a release is on its way): no late extension.
    if (kind_ == op_kind::auto_extend && (!st_->wd || !st_->wd->active())) return finish(errc::not_held);
    if (ctx_.deadline <= clock::now()) return finish(errc::deadline_exceeded);
    if (!st_->has_value(false)) return finish(errc::not_held);
    if (extends()) {
      // Once lost or let go, the acquisition is over: no extension may
      // re-arm its keys.
      if (const errc refused = extension_refused(); refused != errc{}) return finish(refused);
      if (!st_->extend_call) {
        st_->extend_call =
            st_->call(extend_script(), &lock_keys::keys,
                      {st_->value_snapshot(), st_->expiry_ms, st_->opts.set_nx_on_extend ? "1" : "0"}, false);
      }
    }
    const script_call own_call = extends() && own_duration()
                                     ? st_->call(extend_script(), &lock_keys::keys,
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
      spec = mutex_round(*st_, st_->call(check_script(), &lock_keys::keys, {st_->value_snapshot()}, false),
                         classify_three_way);
    }
    attempts_ = 1;
    started_round_at_ = clock::now();
    // A shorter TTL than the one the keys have: every node that applies it
    // keeps the key only until about start + duration, whatever this
    // round's outcome (a failed or abandoned round may still have reached
    // some of the quorum the old validity rests on), so the validity is cut
    // to that before anything is sent. A longer one changes nothing here.
    if (extends() && own_duration()) {
      std::lock_guard lk(st_->mu);
      st_->until = std::min(st_->until, started_round_at_ + duration_ - drift_);
    }
    in_round_ = true;
    run_round(eng_, std::move(spec), [self = shared_from_this(), this](tally&& t) {
      in_round_ = false;
      if (!finished()) on_round(std::move(t));
    });
  }

  errc extension_refused() {
    std::lock_guard lk(st_->mu);
    if (st_->lost.stop_requested()) return errc::lost;
    if (st_->released || !st_->held) return errc::not_held;
    return errc{};
  }

  void on_round(tally&& t) {
    last_ = std::move(t);
    const auto q = eng_.quorum();
    if (last_.ok < q) return finish(holder_failure(last_, q));
    if (!extends()) return finish({});
    // The new validity, as for an acquisition, from this round's start.
    const auto elapsed = duration_cast<microseconds>(clock::now() - started_round_at_);
    if (validity(duration_, elapsed, drift_) <= microseconds::zero()) return finish(errc::validity_elapsed);
    bool lost = false;
    {
      std::lock_guard lk(st_->mu);
      lost = st_->lost.stop_requested();
      if (!lost) st_->until = started_round_at_ + duration_ - drift_;
    }
    // The loss was reported while this extension was in flight (the watchdog
    // does not wait for it past until - margin). The holder has been told to
    // stop, so the keys it just re-armed are released rather than left to
    // block others for another expiry.
    if (lost) {
      release_everywhere_retried(*st_);
      return finish(errc::lost);
    }
    finish({});
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
  clock::time_point started_round_at_{};
};

}  // namespace

std::shared_ptr<mutex_operation> make_release(std::shared_ptr<mutex_state> st, context ctx,
                                              std::function<void(result)> done) {
  return std::make_shared<release_operation>(std::move(st), std::move(ctx), std::move(done));
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
