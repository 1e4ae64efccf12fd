// The life of one Mutex operation: submitted from the caller's thread, queued
// behind the mutex's previous operation, bounded by its context, finished
// exactly once.

#include "redlock/mutex_operation.hpp"

#include "redlock/mutex_state.hpp"

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;

mutex_operation::mutex_operation(std::shared_ptr<mutex_state> st, context ctx,
                                 std::function<void(result)> done, bool records_result)
    : st_(std::move(st)),
      eng_(st_->eng),
      ctx_(std::move(ctx)),
      done_(std::move(done)),
      records_result_(records_result),
      started_at_(clock::now()) {}

// In that order: once posted, the loop may finish the operation and reset
// stop_cb_ at any moment, so the caller's thread must be done with it.
void mutex_operation::submit() {
  auto self = shared_from_this();
  if (ctx_.stop.stop_possible()) {
    std::weak_ptr<mutex_operation> weak = self;
    event_loop* loop = &eng_.loop();
    stop_cb_.emplace(ctx_.stop, canceller{weak, loop});
  }
  eng_.loop().post([self] { self->enqueue(); });
}

void mutex_operation::canceller::operator()() const {
  loop->post([op = op] {
    if (auto o = op.lock()) o->abandon(errc::cancelled);
  });
}

// Operations of one mutex run one at a time, so a release never overtakes
// the acquisition it undoes.
//
// An operation already answered by now (its caller's token was stopped
// before the call) still takes its turn: an unlock releases whatever the
// context says.
void mutex_operation::enqueue() {
  before_queue();
  if (!finished_) {
    self_ = shared_from_this();
    eng_.add_task(this);
    registered_ = true;
  }
  if (st_->busy) {
    st_->queue.push_back([self = shared_from_this()] { self->take_turn(); });
    return;
  }
  st_->busy = true;
  take_turn();
}

void mutex_operation::take_turn() {
  turn_taken_ = true;
  if (finished_) {
    on_turn_after_finish();
    return advance_queue();
  }
  if (!may_start()) return finish(errc::shutting_down);
  if (ctx_.deadline != clock::time_point::max()) {
    deadline_timer_ = loop_timer::create(eng_.loop().loop());
    const auto left = duration_cast<microseconds>(ctx_.deadline - clock::now());
    deadline_timer_->start(left, [this] { abandon(errc::deadline_exceeded); });
  }
  start();
}

void mutex_operation::abandon(errc why) {
  if (finished_) return;
  on_abandon();
  finish(why);
}

void mutex_operation::finish(errc why) {
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
  if (records_result_) {
    std::lock_guard lk(st_->mu);
    st_->last = r;
  }
  // Counted and observed before the caller hears of it, and outside `mu`:
  // stats() read after a call returns includes that call.
  on_outcome(r);
  auto done = std::move(done_);
  // The stop callback may be running on another thread right now; its
  // destructor waits for it, and it only posts, so this cannot deadlock.
  stop_cb_.reset();
  if (done) done(std::move(r));
  if (turn_taken_) advance_queue();
}

void mutex_operation::advance_queue() {
  if (st_->queue.empty()) {
    st_->busy = false;
    return;
  }
  auto next = std::move(st_->queue.front());
  st_->queue.pop_front();
  next();
}

}  // namespace redsync::detail
