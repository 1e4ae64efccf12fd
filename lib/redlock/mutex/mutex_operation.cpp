// A Mutex operation's turn: queued behind the mutex's previous operation,
// its outcome recorded in the mutex's last_result().

#include "redlock/mutex/mutex_operation.hpp"

#include "redlock/mutex/mutex_state.hpp"

namespace redsync::detail {

mutex_operation::mutex_operation(std::shared_ptr<mutex_state> st, context ctx,
                                 std::function<void(result)> done, bool records_result)
    : bounded_operation(st->eng, std::move(ctx)),
      st_(std::move(st)),
      done_(std::move(done)),
      records_result_(records_result) {}

// An operation already answered by now (its caller's token was stopped
// before the call) still takes its turn: an unlock releases whatever the
// context says.
void mutex_operation::on_posted() {
  before_queue();
  hold();
  if (st_->busy) {
    st_->queue.push_back(
        [self = std::static_pointer_cast<mutex_operation>(shared_from_this())] { self->take_turn(); });
    return;
  }
  st_->busy = true;
  take_turn();
}

void mutex_operation::take_turn() {
  turn_taken_ = true;
  if (finished()) {
    on_turn_after_finish();
    return advance_queue();
  }
  begin();
}

void mutex_operation::report(result r) {
  if (records_result_) {
    std::lock_guard lk(st_->mu);
    st_->last = r;
  }
  // Counted and observed before the caller hears of it, and outside `mu`:
  // stats() read after a call returns includes that call.
  on_outcome(r);
  auto done = std::move(done_);
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
