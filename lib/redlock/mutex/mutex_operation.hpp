#pragma once

// What every operation of a Mutex (acquire, release, extend, check) shares,
// whatever it does on the nodes: it waits its turn behind the mutex's
// previous operation, and leaves its outcome in the mutex's last_result().
// The context, the shutdown and finishing exactly once are
// bounded_operation's.
//
// The kinds (acquisition.hpp, holder_operations.hpp) only say what to do when
// their turn comes and what to clean up; they never see the queue or the
// timers. Loop thread only, except submit().

#include "redlock/engine/bounded_operation.hpp"

#include <redsync/context.hpp>
#include <redsync/error.hpp>

#include <functional>
#include <memory>

namespace redsync::detail {

struct mutex_state;

class mutex_operation : public bounded_operation {
 public:
  // `done` runs once on the loop thread with the outcome (may be empty).
  // An operation that `records_result` leaves its outcome in the mutex's
  // last_result() (automatic extensions do not).
  mutex_operation(std::shared_ptr<mutex_state> st, context ctx, std::function<void(result)> done,
                  bool records_result = true);

 protected:
  // ---- what a kind of operation provides, besides bounded_operation's ----
  // Loop thread, as the operation is queued.
  virtual void before_queue() {}
  // The turn of an operation that was already answered while it waited
  // (cancelled, out of time): work that must happen whatever the context.
  virtual void on_turn_after_finish() {}
  // Observability: the outcome, before the caller is answered (telemetry.hpp).
  virtual void on_outcome(const result& r) { (void)r; }

  const std::shared_ptr<mutex_state> st_;

 private:
  // Operations of one mutex run one at a time, so a release never
  // overtakes the acquisition it undoes.
  void on_posted() override;
  void report(result r) override;
  void take_turn();
  void advance_queue();

  std::function<void(result)> done_;
  const bool records_result_;
  bool turn_taken_ = false;
};

}  // namespace redsync::detail
