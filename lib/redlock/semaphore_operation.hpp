#pragma once

// What every operation of a Semaphore or a permit (acquire, release, extend)
// shares: it is handed to the loop from the caller's thread, bounded by its
// context (deadline timer, stop_token), wound up when the engine shuts down,
// and ends exactly once in finish(), which answers the caller.
//
// Unlike a Mutex's operations (mutex_operation.hpp) they do not queue behind
// each other: every acquisition is its own holder, and a permit's release
// and extension act on a permit nobody else can touch. Loop thread only,
// except submit().

#include "redlock/engine.hpp"
#include "redlock/round.hpp"
#include "transport/loop_timer.hpp"

#include <redsync/context.hpp>
#include <redsync/error.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

namespace redsync::detail {

class semaphore_operation : public loop_task, public std::enable_shared_from_this<semaphore_operation> {
 public:
  using clock = std::chrono::steady_clock;

  semaphore_operation(engine& eng, context ctx);

  // Caller's thread: connects the caller's stop_token (one already stopped
  // cancels at once) and hands the operation to the loop.
  void submit();

  // The engine shuts down: the operation ends with errc::shutting_down.
  void on_shutdown() override { abandon(errc::shutting_down); }

 protected:
  // The loop took the operation and the engine is still open to it.
  virtual void start() = 0;
  // The loop took an operation already answered (cancelled before it
  // started): work that must happen whatever the context.
  virtual void on_late_start() {}
  // Deadline, cancellation or shutdown, before finishing: undo what may be
  // in flight.
  virtual void on_abandon() {}
  // Closes the kind's own handles; runs once, before report().
  virtual void on_finish(errc why) { (void)why; }
  // Answers the caller (once).
  virtual void report(result r) = 0;

  // Ends the operation with `why` (errc{} for success) unless it already
  // ended: the result carries last_'s per-node detail, attempts_ and `reason`.
  void finish(errc why, std::string reason = {});
  void abandon(errc why);
  bool finished() const noexcept { return finished_; }

  engine& eng_;
  const context ctx_;
  tally last_;
  int attempts_ = 0;
  // A round of this operation is in flight.
  bool in_round_ = false;

 private:
  struct canceller {
    std::weak_ptr<semaphore_operation> op;
    event_loop* loop;
    void operator()() const;
  };

  void begin();

  const clock::time_point started_at_;
  // From begin() until finish() the operation owns itself: timers and
  // rounds may be the only things pointing at it.
  std::shared_ptr<semaphore_operation> self_;
  std::optional<std::stop_callback<canceller>> stop_cb_;
  loop_timer* deadline_timer_ = nullptr;
  bool registered_ = false;
  bool finished_ = false;
};

}  // namespace redsync::detail
