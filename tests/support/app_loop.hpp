// Test harness: an application's own libuv loop, run by a thread of its own,
// and a way to run a function on that thread, as the application's own
// callbacks would (e.g. to destroy a Redsync from its own loop thread: the
// lifetime tests).
//
// Every handle of its own (the stop and call doors) is made in the
// constructor, before the loop runs: libuv's handle list and counts are not
// thread-safe, so a handle may only be made on the loop's thread or while
// nobody runs the loop (the rule redsync_options::loop states for a
// Redsync too). Only uv_async_send crosses threads.
#pragma once

#include <uv.h>

#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace redsync::test {

class app_loop {
 public:
  // The loop and its doors; not running yet (make what must exist before
  // it runs, e.g. a Redsync on it, then run()).
  app_loop() {
    if (uv_loop_init(&loop_) != 0) throw std::runtime_error("app_loop: uv_loop_init failed");
    stop_.data = this;
    call_.data = this;
    uv_async_init(&loop_, &stop_, [](uv_async_t* h) {
      auto* self = static_cast<app_loop*>(h->data);
      uv_close(reinterpret_cast<uv_handle_t*>(&self->stop_), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&self->call_), nullptr);
    });
    uv_async_init(&loop_, &call_, [](uv_async_t* h) { static_cast<app_loop*>(h->data)->run_calls(); });
  }
  // Stops the loop if stop() was not called, and waits for its thread
  // (for ever, if something of a test's is left open on the loop).
  ~app_loop() {
    (void)stop(std::chrono::seconds(60));
    if (runner_.joinable()) runner_.join();
  }
  app_loop(const app_loop&) = delete;
  app_loop& operator=(const app_loop&) = delete;

  uv_loop_t* get() noexcept { return &loop_; }

  // Starts the thread that runs the loop until stop().
  void run() {
    runner_ = std::thread([this] {
      uv_run(&loop_, UV_RUN_DEFAULT);
      returned_.set_value();
    });
  }

  // Runs `fn` on the loop's thread. True once it has returned, false if it
  // did not within `bound` (it may still run later: keep what it uses).
  bool call(std::function<void()> fn, std::chrono::milliseconds bound) {
    auto done = std::make_shared<std::promise<void>>();
    auto returned = done->get_future();
    {
      std::lock_guard lock(mutex_);
      calls_.push_back([fn = std::move(fn), done] {
        fn();
        done->set_value();
      });
    }
    uv_async_send(&call_);
    return returned.wait_for(bound) == std::future_status::ready;
  }

  // Resets each of `owners` (smart pointers or optionals: a Mutex before
  // its Redsync) on the loop's thread, in order. True once done, false if
  // not within `bound`.
  template <class... Owners>
  bool reset(std::chrono::milliseconds bound, Owners&... owners) {
    return call([&] { (owners.reset(), ...); }, bound);
  }

  // Closes the doors; the loop then ends once nothing else of anyone's is
  // open on it. True if it ended within `bound` and closed cleanly (nothing
  // left on it). Once; later calls return the first one's answer.
  bool stop(std::chrono::milliseconds bound) {
    if (stopped_) return closed_;
    stopped_ = true;
    uv_async_send(&stop_);
    if (!runner_.joinable()) {
      // Never run: the closes run here, as no other thread has the loop.
      uv_run(&loop_, UV_RUN_DEFAULT);
    } else if (returned_.get_future().wait_for(bound) == std::future_status::ready) {
      runner_.join();
    } else {
      return closed_ = false;  // the destructor waits for the thread
    }
    return closed_ = uv_loop_close(&loop_) == 0;
  }

 private:
  void run_calls() {
    std::deque<std::function<void()>> now;
    {
      std::lock_guard lock(mutex_);
      now.swap(calls_);
    }
    for (auto& fn : now) fn();
  }

  uv_loop_t loop_{};
  uv_async_t stop_{};
  uv_async_t call_{};
  std::mutex mutex_;
  std::deque<std::function<void()>> calls_;
  std::thread runner_;
  std::promise<void> returned_;
  bool stopped_ = false;
  bool closed_ = false;
};

}  // namespace redsync::test
