// Test harness: run a function on the thread of a libuv loop that another
// thread is running (uv_run), as an application's own callback would, e.g.
// to destroy a Redsync from its own loop thread (lifetime tests).
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <future>

namespace redsync::test {

/// Runs `fn` on `loop`'s thread through a uv_async_t of its own, freed once
/// closed. True once `fn` has returned, false if it did not within `bound`.
inline bool run_on_loop_thread(uv_loop_t* loop, std::function<void()> fn, std::chrono::milliseconds bound) {
  struct call {
    uv_async_t handle{};
    std::function<void()> fn;
    std::promise<void> done;
  };
  auto* c = new call{{}, std::move(fn), {}};
  auto returned = c->done.get_future();
  c->handle.data = c;
  uv_async_init(loop, &c->handle, [](uv_async_t* h) {
    auto* self = static_cast<call*>(h->data);
    self->fn();
    self->done.set_value();
    uv_close(reinterpret_cast<uv_handle_t*>(h),
             [](uv_handle_t* closed) { delete static_cast<call*>(closed->data); });
  });
  uv_async_send(&c->handle);
  return returned.wait_for(bound) == std::future_status::ready;
}

/// Resets each of `owners` (smart pointers or optionals: a Mutex before its
/// Redsync) on `loop`'s thread, in order, as an application's callback
/// would. True once done, false if not within `bound`.
template <class... Owners>
bool reset_on_loop_thread(uv_loop_t* loop, std::chrono::milliseconds bound, Owners&... owners) {
  return run_on_loop_thread(
      loop, [&] { (owners.reset(), ...); }, bound);
}

}  // namespace redsync::test
