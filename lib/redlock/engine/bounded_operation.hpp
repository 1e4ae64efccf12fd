#pragma once

// What every operation on the loop shares, a Mutex's (mutex_operation.hpp)
// as a Semaphore's or a permit's: it is handed to the loop from the
// caller's thread, bounded by its context (deadline timer, stop_token),
// wound up when the engine shuts down, and ends exactly once in finish(),
// which answers the caller through report().
//
// By default an operation starts as soon as the loop takes it (a
// semaphore's acquisitions and a permit's steps: each is its own holder);
// a Mutex's operations queue behind each other instead (on_posted). Loop
// thread only, except submit().

#include "redlock/engine/engine.hpp"
#include "redlock/engine/round.hpp"
#include "transport/loop_timer.hpp"

#include <redsync/context.hpp>
#include <redsync/error.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

namespace redsync::detail {

class bounded_operation : public loop_task, public std::enable_shared_from_this<bounded_operation> {
 public:
  using clock = std::chrono::steady_clock;

  bounded_operation(engine& eng, context ctx);

  // Caller's thread: connects the caller's stop_token (one already stopped
  // cancels at once) and hands the operation to the loop (on_posted).
  void submit();
  // submit() for an operation nobody waits for (a destructor's release).
  // While the engine shuts down, on the loop thread (a callback that lets
  // go of a permit or Mutex as the Redsync goes away), it is taken at once:
  // posted, it would run after the shutdown's wind-up, which is already
  // queued and after which nothing is sent, leaving the key on every node
  // until it expires. Otherwise as submit().
  void submit_unanswered();

  // The engine shuts down: the operation ends with errc::shutting_down.
  void on_shutdown() override { abandon(errc::shutting_down); }

 protected:
  // ---- what a kind of operation provides ----
  // Its turn came and the engine is still open to it: do the work, and
  // eventually finish().
  virtual void start() = 0;
  // Answers the caller (once), with the outcome finish() built.
  virtual void report(result r) = 0;
  // The loop took the operation. Default: begin() at once.
  virtual void on_posted() { begin(); }
  // Whether the operation may still start while the engine shuts down.
  virtual bool may_start() const { return !eng_.shutting_down(); }
  // The turn of an operation already answered (cancelled before it
  // started): work that must happen whatever the context.
  virtual void on_late_start() {}
  // Deadline, cancellation or shutdown, before finishing: undo what may be
  // in flight.
  virtual void on_abandon() {}
  // Closes the kind's own handles; runs once, before report().
  virtual void on_finish(errc why) { (void)why; }

  // ---- for the kinds ----
  // Its turn: on_late_start() if already answered, errc::shutting_down
  // unless may_start(), else the deadline timer and start().
  void begin();
  // From now until finish() the operation owns itself (timers and rounds
  // may be the only things pointing at it) and is wound up at shutdown.
  void hold();
  // Ends the operation with `why` (errc{} for success) unless it already
  // ended: the result carries last_'s per-node detail, attempts_ and `reason`.
  void finish(errc why, std::string reason = {});
  // Ends it after on_abandon().
  void abandon(errc why);
  bool finished() const noexcept { return finished_; }

  engine& eng_;
  const context ctx_;
  // The last round's per-node outcome and the number of attempts, reported.
  tally last_;
  int attempts_ = 0;
  // A round of this operation is in flight.
  bool in_round_ = false;

 private:
  struct canceller {
    std::weak_ptr<bounded_operation> op;
    event_loop* loop;
    void operator()() const;
  };

  const clock::time_point started_at_;
  std::shared_ptr<bounded_operation> self_;
  std::optional<std::stop_callback<canceller>> stop_cb_;
  // Guards stop_cb_: the caller's thread sets it in submit() while the loop
  // may already finish the operation and reset it. A token stopped before
  // the call runs the canceller inside the constructor, which posts the
  // cancellation before emplace() has returned (TSan saw the loop thread's
  // reset race with it).
  std::mutex stop_mu_;
  loop_timer* deadline_timer_ = nullptr;
  bool registered_ = false;
  bool finished_ = false;
};

}  // namespace redsync::detail
