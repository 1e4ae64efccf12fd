#pragma once

// The libuv loop every node pool runs on: either a loop thread owned by the
// Redsync, or a loop the application owns and runs itself.

#include <functional>
#include <memory>

struct uv_loop_s;

namespace redsync::detail {

class event_loop {
 public:
  // external == nullptr: create a loop and run it on a background thread
  // until destruction. Otherwise use the application's loop (which it runs).
  explicit event_loop(uv_loop_s* external);
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

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace redsync::detail
