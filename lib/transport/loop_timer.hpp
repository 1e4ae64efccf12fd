#pragma once

// A one-shot libuv timer with a std::function callback whose memory is freed
// only after libuv's close callback (libuv's lifetime rule). Loop thread only.
// Use: `auto* t = loop_timer::create(loop);  t->start(d, fn);  ...  t->close();`
// After close() the object must not be touched; a pending callback never runs.

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>

namespace redsync::detail {

class loop_timer {
 public:
  static loop_timer* create(uv_loop_t* loop) {
    auto* t = new loop_timer;
    uv_timer_init(loop, &t->handle_);
    t->handle_.data = t;
    return t;
  }

  void start(std::chrono::microseconds after, std::function<void()> fn) {
    fn_ = std::move(fn);
    // libuv measures timers against a cached loop time floored to whole
    // milliseconds: refresh it, round the delay up, and add 1 ms for the
    // floor, so a deadline never fires before its time (late by < 2 ms).
    uv_update_time(handle_.loop);
    const auto ms = static_cast<std::uint64_t>((after.count() + 999) / 1000) + 1;
    uv_timer_start(&handle_, &loop_timer::on_timer, after.count() <= 0 ? 0 : ms, 0);
  }

  void stop() {
    uv_timer_stop(&handle_);
    fn_ = nullptr;
  }

  void close() {
    stop();
    uv_close(reinterpret_cast<uv_handle_t*>(&handle_),
             [](uv_handle_t* h) { delete static_cast<loop_timer*>(h->data); });
  }

 private:
  loop_timer() = default;

  static void on_timer(uv_timer_t* h) {
    auto* self = static_cast<loop_timer*>(h->data);
    auto fn = std::move(self->fn_);
    self->fn_ = nullptr;
    if (fn) fn();
  }

  uv_timer_t handle_{};
  std::function<void()> fn_;
};

}  // namespace redsync::detail
