#pragma once

// What every operation of a Mutex (acquire, release, extend, check) shares,
// whatever it does on the nodes: it waits its turn behind the mutex's
// previous operation, is bounded by its context (deadline timer, stop_token),
// is wound up when the engine shuts down, and ends exactly once in finish(),
// which answers the caller and lets the next operation run.
//
// The kinds (acquisition.hpp, holder_operations.hpp) only say what to do when
// their turn comes and what to clean up; they never see the queue or the
// timers. Loop thread only, except submit().

#include "redlock/engine.hpp"
#include "redlock/round.hpp"
#include "transport/loop_timer.hpp"

#include <redsync/context.hpp>
#include <redsync/error.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>

namespace redsync::detail {

struct mutex_state;

class mutex_operation : public loop_task, public std::enable_shared_from_this<mutex_operation> {
 public:
  using clock = std::chrono::steady_clock;

  // `done` runs once on the loop thread with the outcome (may be empty).
  // An operation that `records_result` leaves its outcome in the mutex's
  // last_result() (automatic extensions do not).
  mutex_operation(std::shared_ptr<mutex_state> st, context ctx, std::function<void(result)> done,
                  bool records_result = true);

  // Caller's thread: connects the caller's stop_token (a token already
  // stopped cancels at once) and hands the operation to the loop.
  void submit();

  // The engine shuts down: the operation ends with errc::shutting_down.
  void on_shutdown() override { abandon(errc::shutting_down); }

 protected:
  // ---- what a kind of operation provides ----
  // Its turn came and the engine is still open to it: do the work, and
  // eventually finish().
  virtual void start() = 0;
  // Whether the operation may still start while the engine shuts down.
  virtual bool may_start() const { return !eng_.shutting_down(); }
  // Loop thread, as the operation is queued.
  virtual void before_queue() {}
  // The turn of an operation that was already answered while it waited
  // (cancelled, out of time): work that must happen whatever the context.
  virtual void on_turn_after_finish() {}
  // Deadline, cancellation or shutdown, before the operation finishes: undo
  // what may be in flight.
  virtual void on_abandon() {}
  // Closes the kind's own handles; runs once, before the caller is answered.
  virtual void on_finish(errc why) { (void)why; }
  // Observability: the outcome, before the caller is answered (telemetry.hpp).
  virtual void on_outcome(const result& r) { (void)r; }

  // ---- for the kinds ----
  // Ends the operation with `why` (errc{} for success) unless it already
  // ended: the result carries `last_`'s per-node detail and `attempts_`.
  void finish(errc why);
  // Ends it after on_abandon().
  void abandon(errc why);
  bool finished() const noexcept { return finished_; }

  const std::shared_ptr<mutex_state> st_;
  engine& eng_;
  const context ctx_;
  // The last round's per-node outcome and the number of attempts, reported.
  tally last_;
  int attempts_ = 0;
  // A round of this operation is in flight.
  bool in_round_ = false;

 private:
  struct canceller {
    std::weak_ptr<mutex_operation> op;
    event_loop* loop;
    void operator()() const;
  };

  void enqueue();
  void take_turn();
  void advance_queue();

  std::function<void(result)> done_;
  const bool records_result_;
  const clock::time_point started_at_;
  // From enqueue() until finish() the operation owns itself: timers and
  // rounds may be the only things pointing at it.
  std::shared_ptr<mutex_operation> self_;
  std::optional<std::stop_callback<canceller>> stop_cb_;
  loop_timer* deadline_timer_ = nullptr;
  bool registered_ = false;
  bool turn_taken_ = false;
  bool finished_ = false;
};

}  // namespace redsync::detail
