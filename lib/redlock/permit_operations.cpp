// Release and extend of a permit: one round each, judged as the mutex's
// holder steps are (holder_failure).

#include "redlock/permit_operations.hpp"

#include "redlock/bounded_operation.hpp"
#include "redlock/mutex_rounds.hpp"
#include "redlock/quorum.hpp"
#include "redlock/release_sender.hpp"
#include "redlock/script_answers.hpp"

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

class permit_operation : public bounded_operation {
 public:
  permit_operation(std::shared_ptr<permit_state> p, context ctx, std::function<void(result)> done)
      : bounded_operation(p->sem->eng, std::move(ctx)), p_(std::move(p)), done_(std::move(done)) {}

 protected:
  std::shared_ptr<permit_operation> self() {
    return std::static_pointer_cast<permit_operation>(shared_from_this());
  }
  void report(result r) override {
    if (done_) done_(std::move(r));
  }

  const std::shared_ptr<permit_state> p_;

 private:
  std::function<void(result)> done_;
};

// The release goes out whatever the context says (also when the caller
// cancelled before the loop took it), and again in the background to a node
// that does not answer, until the permit's expiry makes it moot.
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
    spec.send = sender();
    in_round_ = true;
    run_round(eng_, std::move(spec), [self = self()](tally&& t) {
      auto& op = static_cast<release_operation&>(*self);
      op.in_round_ = false;
      if (op.finished()) return;
      op.last_ = std::move(t);
      if (op.last_.ok >= op.p_->sem->quorum) return op.finish({});
      op.finish(holder_failure(op.last_, op.p_->sem->quorum));
    });
  }

  void on_late_start() override {
    if (!let_go() || !eng_.can_send() || eng_.shutting_down()) return;
    const auto send = sender();
    for (std::size_t i = 0; i < eng_.size(); ++i) send(i, eng_.node(i), [](command_result&&) {});
  }

  // Marks the permit let go; false if it was not held.
  bool let_go() {
    std::lock_guard lk(p_->mu);
    if (!p_->held) return false;
    p_->held = false;
    return true;
  }

  round_sender sender() const {
    const semaphore_state& s = *p_->sem;
    return [e = &eng_, call = p_->release_call, route = s.route, timeout = s.timeout,
            give_up_at = clock::now() + s.opts.expiry + s.drift](std::size_t, node_pool& pool,
                                                                 command_callback done) {
      send_release(
          *e, pool, route, call, timeout, give_up_at, [] { return true; }, std::move(done));
    };
  }
};

class extend_operation final : public permit_operation {
 public:
  using permit_operation::permit_operation;

 private:
  void start() override {
    {
      std::lock_guard lk(p_->mu);
      if (!p_->held) return finish(errc::not_held);
    }
    const auto started = clock::now();
    in_round_ = true;
    run_round(eng_, p_->sem->round(p_->extend_call, classify_three_way), [self = self(), started](tally&& t) {
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
    {
      std::lock_guard lk(p_->mu);
      if (p_->held) p_->until = until;
    }
    finish({});
  }
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

void submit_extend(std::shared_ptr<permit_state> p, const context& ctx, std::function<void(result)> done) {
  std::make_shared<extend_operation>(std::move(p), ctx, std::move(done))->submit();
}

}  // namespace redsync::detail
