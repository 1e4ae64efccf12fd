// The life of one operation on the loop: submitted from the caller's
// thread, bounded by its context, finished exactly once.

#include "redlock/engine/bounded_operation.hpp"

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;

bounded_operation::bounded_operation(engine& eng, context ctx)
    : eng_(eng), ctx_(std::move(ctx)), started_at_(clock::now()) {}

// In that order: once posted, the loop may finish the operation and reset
// stop_cb_ at any moment, so the caller's thread must be done with it. A
// token stopped already (or stopped by another thread meanwhile) runs the
// canceller inside emplace(), and its post can reach the loop first: hence
// stop_mu_.
void bounded_operation::submit() {
  auto self = shared_from_this();
  if (ctx_.stop.stop_possible()) {
    std::lock_guard lk(stop_mu_);
    stop_cb_.emplace(ctx_.stop, canceller{self, &eng_.loop()});
  }
  eng_.loop().post([self] { self->on_posted(); });
}

void bounded_operation::submit_unanswered() {
  if (!eng_.shutting_down() || !eng_.loop().on_loop_thread()) return submit();
  on_posted();
}

void bounded_operation::canceller::operator()() const {
  loop->post([op = op] {
    if (auto o = op.lock()) o->abandon(errc::cancelled);
  });
}

void bounded_operation::hold() {
  if (finished_ || registered_) return;
  self_ = shared_from_this();
  eng_.add_task(this);
  registered_ = true;
}

void bounded_operation::begin() {
  if (finished_) return on_late_start();
  if (!may_start()) return finish(errc::shutting_down);
  hold();
  if (ctx_.deadline != clock::time_point::max()) {
    deadline_timer_ = loop_timer::create(eng_.loop().loop());
    const auto left = duration_cast<microseconds>(ctx_.deadline - clock::now());
    deadline_timer_->start(left, [this] { abandon(errc::deadline_exceeded); });
  }
  start();
}

void bounded_operation::abandon(errc why) {
  if (finished_) return;
  on_abandon();
  finish(why);
}

void bounded_operation::finish(errc why, std::string reason) {
  if (finished_) return;
  finished_ = true;
  const auto keep_alive = std::move(self_);
  if (deadline_timer_) {
    deadline_timer_->close();
    deadline_timer_ = nullptr;
  }
  if (registered_) eng_.remove_task(this);
  on_finish(why);
  result r;
  if (why != errc{}) r.error = make_error_code(why);
  r.nodes = std::move(last_.nodes);
  r.attempts = attempts_;
  r.elapsed = duration_cast<microseconds>(clock::now() - started_at_);
  r.reason = std::move(reason);
  // A refusal because the name is held as the other kind says which name
  // and which kind (the last round's words).
  if (why == errc::kind_clash && r.reason.empty()) r.reason = std::move(last_.other_kind_why);
  // The stop callback may be running on another thread right now; its
  // destructor waits for it, and it only posts (never takes stop_mu_), so
  // this cannot deadlock.
  {
    std::lock_guard lk(stop_mu_);
    stop_cb_.reset();
  }
  report(std::move(r));
}

}  // namespace redsync::detail
