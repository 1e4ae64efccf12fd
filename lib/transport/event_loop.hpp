#pragma once

// The libuv loop every node pool runs on: either a loop thread owned by the
// Redsync, or a loop the application owns and runs itself.

#include <functional>
#include <memory>

struct uv_loop_s;

namespace redsync::detail {

class loop_owner;

class event_loop {
 public:
  // external == nullptr: create a loop and run it on a background thread
  // until destruction, lending it to blocking callers (borrow) when
  // `lend_to_callers`. Otherwise use the application's loop (which it runs).
  explicit event_loop(uv_loop_s* external, bool lend_to_callers = true);
  // Owned loop, from another thread: closes its own handles (and,
  // defensively, any handle still open: the engine closes its pools first),
  // joins the thread and closes the loop. Owned loop, on its own thread:
  // closes its handles and returns at once; the thread ends once every
  // other handle has closed (the pools drain), closes the loop, and is
  // joined later (by the next owned loop made, or at exit). External loop,
  // from another thread: the application must keep running its loop until
  // this returns; on the loop's own thread: closes asynchronously and
  // returns at once. On the loop thread, tasks posted but not yet run are
  // dropped.
  ~event_loop();
  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  uv_loop_s* loop() const noexcept;
  // Thread-safe. Runs `fn` on the loop thread, in posting order, never inside
  // post() itself (even when called on the loop thread).
  void post(std::function<void()> fn);
  // True when called on the thread currently running the loop.
  bool on_loop_thread() const noexcept;
  // Runs `fn` on the loop and blocks until it returned. Must not be called on
  // the loop thread.
  void run_sync(const std::function<void()>& fn);

  // The loop lent to the calling thread for one blocking call, so that its
  // round trips cost no thread hop (transport/loop_owner.hpp): granted for
  // an owned loop that nobody runs at this moment; refused (false) for the
  // application's loop, while another thread runs ours, or on shutdown.
  // While granted, this thread is the loop thread (on_loop_thread() is
  // true, posts from it need no wake-up) and runs everything due on the
  // loop, anyone's. Given back on destruction.
  class borrow {
   public:
    explicit borrow(event_loop& l);
    ~borrow();
    borrow(const borrow&) = delete;
    borrow& operator=(const borrow&) = delete;
    explicit operator bool() const noexcept { return owner_ != nullptr; }
    // Runs the loop until done() is true or the loop has nothing left.
    template <class Done>
    void run_until(Done done) {
      while (owner_ != nullptr && !done() && turn()) {
      }
    }

   private:
    bool turn();
    loop_owner* owner_ = nullptr;
  };

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace redsync::detail
