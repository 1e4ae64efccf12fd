// Release and extend of a permit: one round each, judged as the mutex's
// holder steps are (holder_failure). A permit's steps are not queued behind
// each other as a mutex's are: a release stops the watchdog when it starts,
// on the loop thread, so an automatic extension either went out before it
// (on the same connection, so the node runs it first) or is refused.

#include "redlock/semaphore/permit_operations.hpp"

#include "redlock/engine/bounded_operation.hpp"
#include "redlock/engine/release_sender.hpp"
#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/quorum.hpp"
#include "redlock/scripts/script_answers.hpp"

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using clock = std::chrono::steady_clock;

class permit_operation : public bounded_operation {
 public:
  permit_operation(std::shared_ptr<permit_state> p, context ctx, std::function<void(result)> done)
      : bounded_operation(p->sem->eng, std::move(ctx)), p_(std::move(p)), done_(std::move(done)) {}

 protected:
  std::shared_ptr<permit_operation> self() {
    return std::static_pointer_cast<permit_operation>(shared_from_this());
  }
  // Observability first (telemetry.hpp), then the caller.
  virtual void on_outcome(const result& r) = 0;
  void report(result r) override {
    on_outcome(r);
    if (done_) done_(std::move(r));
  }

  const std::shared_ptr<permit_state> p_;

 private:
  std::function<void(result)> done_;
};

// The release of a permit to every node, retried in the background while a
// node does not answer, until the permit's expiry makes it moot.
round_sender permit_release_sender(const permit_state& p) {
  const semaphore_state& s = *p.sem;
  return [e = &s.eng, call = p.release_call, route = s.route, timeout = s.timeout,
          give_up_at = clock::now() + s.opts.expiry + s.drift](std::size_t, member_slot pool,
                                                               command_callback done) {
    send_release(
        *e, pool, route, call, timeout, give_up_at, [] { return true; }, std::move(done));
  };
}

// The same release, nobody waiting for the replies.
void release_unawaited(const permit_state& p) {
  engine& eng = p.sem->eng;
  if (!eng.can_send() || eng.shutting_down()) return;
  const auto send = permit_release_sender(p);
  for (std::size_t i = 0; i < eng.size(); ++i) send(i, eng.at(i, p.sem->slot), [](command_result&&) {});
}

// The release goes out whatever the context says (also when the caller
// cancelled before the loop took it). A permit lost under auto-extension is
// still released (it may remain on some nodes), and the caller learns
// errc::lost.
class release_operation final : public permit_operation {
 public:
  using permit_operation::permit_operation;

 private:
  // A release due as the engine shuts down still goes out (the engine
  // waits for it, up to shutdown_timeout).
  bool may_start() const override { return eng_.can_send(); }

  void start() override {
    if (!let_go()) return finish(errc::not_held);
    round_spec spec = p_->sem->round(p_->release_call, classify_three_way);
    spec.send = permit_release_sender(*p_);
    in_round_ = true;
    run_round(eng_, std::move(spec), [self = self()](tally&& t) {
      auto& op = static_cast<release_operation&>(*self);
      op.in_round_ = false;
      if (op.finished()) return;
      op.last_ = std::move(t);
      if (op.p_->lost.stop_requested()) return op.finish(errc::lost);
      if (op.last_.ok >= op.p_->sem->quorum) return op.finish({});
      op.finish(holder_failure(op.last_, op.p_->sem->quorum));
    });
  }

  void on_late_start() override {
    if (let_go()) release_unawaited(*p_);
  }

  // Stops the watchdog before the release is sent, so no automatic
  // extension follows it and re-creates the permit, and marks the permit
  // let go; false if there is nothing to release (never granted, or a
  // release already started).
  bool let_go() {
    if (p_->wd) p_->wd->stop();
    std::lock_guard lk(p_->mu);
    if (p_->released || (!p_->held && !p_->lost.stop_requested())) return false;
    p_->held = false;
    p_->released = true;
    return true;
  }

  void on_outcome(const result& r) override { eng_.telemetry().permit_release(*p_, r); }
};

class extend_operation final : public permit_operation {
 public:
  extend_operation(std::shared_ptr<permit_state> p, context ctx, std::function<void(result)> done,
                   extension_kind kind)
      : permit_operation(std::move(p), std::move(ctx), std::move(done)), kind_(kind) {}

 private:
  bool automatic() const noexcept { return kind_ == extension_kind::automatic; }

  void start() override {
    // The watchdog stopped (a release started, or the loss was declared):
    // no late extension.
    if (automatic() && (!p_->wd || !p_->wd->active())) return finish(errc::not_held);
    if (p_->lost.stop_requested()) return finish(errc::lost);
    {
      std::lock_guard lk(p_->mu);
      if (!p_->held) return finish(errc::not_held);
    }
    const auto started = clock::now();
    in_round_ = true;
    run_round(eng_, p_->sem->round(p_->extend_call, classify_three_way, {}, true),
              [self = self(), started](tally&& t) {
                auto& op = static_cast<extend_operation&>(*self);
                op.in_round_ = false;
                if (op.finished()) return;
                op.last_ = std::move(t);
                op.judge(started);
              });
  }

  // On a quorum, validity restarts from when the extension was sent.
  void judge(clock::time_point started) {
    const semaphore_state& s = *p_->sem;
    if (last_.ok < s.quorum) return finish(holder_failure(last_, s.quorum));
    const auto until = started + s.opts.expiry - s.drift;
    if (until <= clock::now()) return finish(errc::validity_elapsed);
    bool lost = false;
    {
      std::lock_guard lk(p_->mu);
      lost = p_->lost.stop_requested();
      if (p_->held && !lost) p_->until = until;
    }
    // The loss was declared while this extension was in flight (the
    // watchdog does not wait for it past until - margin): the holder was
    // told to stop, so the permit it just re-armed is released rather than
    // left to take a slot for another expiry.
    if (lost) {
      release_unawaited(*p_);
      return finish(errc::lost);
    }
    finish({});
  }

  // An automatic extension that found the watchdog stopped sent nothing:
  // not counted.
  void on_outcome(const result& r) override {
    if (automatic() && r.error == errc::not_held) return;
    eng_.telemetry().permit_extension(*p_, automatic(), r);
  }

  const extension_kind kind_;
};

}  // namespace

void submit_release(std::shared_ptr<permit_state> p, const context& ctx, std::function<void(result)> done) {
  const bool unanswered = !done;
  auto op = std::make_shared<release_operation>(std::move(p), ctx, std::move(done));
  if (unanswered)
    op->submit_unanswered();
  else
    op->submit();
}

void submit_extend(std::shared_ptr<permit_state> p, const context& ctx, std::function<void(result)> done,
                   extension_kind kind) {
  std::make_shared<extend_operation>(std::move(p), ctx, std::move(done), kind)->submit();
}

}  // namespace redsync::detail
