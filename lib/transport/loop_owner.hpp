#pragma once

// Who runs an owned loop at a given moment: its background thread, or a
// caller thread inside a blocking call that borrowed it, so that a blocking
// round trip costs no thread hop (no post to wake the loop thread, no futex
// to wake the caller, no two context switches).
//
// One mutex says who runs the loop: whoever holds it may touch libuv and
// every loop-thread object; the mutex orders one runner's accesses before
// the next runner's. The background thread lets go of it only while it is
// parked, so a borrower never has to wake it to take over:
//
//  - Parked: the background thread sleeps in its own epoll instance, which
//    watches the loop's backend fd (readable when the loop has an event to
//    handle: a reply, a post, a closed socket) and a wake-up eventfd, with
//    the timeout of the loop's next timer. It holds nothing.
//  - A borrower try_locks the mutex (no system call), stops the parked
//    thread from being woken by the backend fd (one epoll_ctl: the borrower
//    handles those events itself), and runs the loop (uv_run once per turn)
//    until its own operation is done. Everything due meanwhile runs on the
//    borrower: other threads' posts, timers, the watchdog, async callbacks.
//  - Giving back: the backend fd is watched again (one epoll_ctl; if events
//    are pending, the parked thread wakes at once), and if the borrower left
//    a timer due before the parked thread's planned wake-up, a timerfd in
//    the park set is set to ring then (not now: by then the events it
//    guards, such as late replies, have usually woken the thread anyway).
//    Then the mutex is released, the borrower's last access.
//
// Parking costs the background thread one more epoll_wait per wake-up, so
// it parks only while callers have tried to borrow in the last second;
// otherwise it sleeps inside uv_run holding the mutex, exactly as a plain
// loop thread, and a caller that finds the mutex taken posts its call as
// before (and so asks the thread to park from then on).
//
// A write to a socket the peer closed raises SIGPIPE in the writing thread.
// The background thread blocks every signal. Immediate writes use
// MSG_NOSIGNAL (socket_write.hpp); only while a write that libuv finishes
// later is pending does a borrower block SIGPIPE, take one its turn raised,
// and restore its mask.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include <signal.h>

struct uv_loop_s;

namespace redsync::detail {

class loop_owner {
 public:
  // `runner`: set to the thread running the loop, cleared while none does
  // (event_loop::on_loop_thread reads it). `settle`: what the loop does
  // right before it polls (write what callbacks queued, a last look at the
  // posted tasks), done also before the loop is left unattended: by the
  // background thread before it parks, by a borrower before it gives back.
  loop_owner(uv_loop_s* loop, std::atomic<std::thread::id>& runner, std::function<void()> settle);
  ~loop_owner();
  loop_owner(const loop_owner&) = delete;
  loop_owner& operator=(const loop_owner&) = delete;

  // The background thread's body: runs the loop until no handle is left.
  // Returns without holding anything.
  void run_background();

  // Caller thread: takes the loop if nobody runs it now.
  bool try_borrow();
  // The borrower: one turn of the loop (may sleep until an event or timer).
  // False once the loop has nothing left to run (it is shutting down).
  bool turn();
  // The borrower, once, after a successful try_borrow. Touches nothing of
  // this object after releasing the mutex (a loop torn down on its own
  // thread may be freed by the background thread right after).
  void give_back();

  // A write libuv finishes later may run on the calling thread (socket_write.hpp):
  // if it is borrowing a loop, it blocks SIGPIPE until it gives the loop back.
  static void shield_borrower_from_sigpipe();

 private:
  void block_sigpipe();
  bool lending_wanted() const noexcept;
  void park(int timeout_ms);
  void resume(std::unique_lock<std::mutex>& running);
  void wake_by(std::int64_t due_ns);

  uv_loop_s* loop_;
  std::atomic<std::thread::id>& runner_;
  std::function<void()> settle_;
  std::mutex running_;  // held by whoever runs the loop
  int park_fd_ = -1;    // the background thread's epoll: backend fd + timer_fd_
  int timer_fd_ = -1;   // rings when a borrower left a timer due sooner
  int backend_fd_ = -1;
  // Steady-clock times (ns), guarded by running_: when the parked thread
  // wakes by itself, and when timer_fd_ rings (never: not armed).
  std::int64_t planned_wake_ = 0;
  std::int64_t timer_armed_ = std::numeric_limits<std::int64_t>::max();
  // The background thread runs a turn that does not sleep.
  std::atomic<bool> background_turn_{false};
  // Steady-clock time of the last borrow attempt (ns since epoch).
  std::atomic<std::int64_t> last_borrow_{0};
  // The borrower's SIGPIPE in this turn, and its mask before we blocked it
  // (restored by give_back), guarded by running_.
  enum class sigpipe { open, blocked_here, blocked_before };
  sigpipe sigpipe_ = sigpipe::open;
  sigset_t saved_mask_{};
  // The loop this thread had borrowed before this one (nested borrows of
  // two Redsyncs' loops), restored on give_back; guarded by running_.
  loop_owner* previous_lent_ = nullptr;
  // The park set could not be restored once: never park again (guarded by
  // running_).
  bool lending_broken_ = false;
};

}  // namespace redsync::detail
