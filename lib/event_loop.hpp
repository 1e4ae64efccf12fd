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
  // Runs `on_shutdown` on the loop (it must close every handle it owns, then
  // call the continuation it is given), then stops and joins the thread of an
  // owned loop and closes that loop. Must not be called on the loop thread.
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
