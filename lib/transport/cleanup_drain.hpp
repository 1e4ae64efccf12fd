#pragma once

// Cleanup commands (releases) that the engine's shutdown waits for before it
// closes the connections, so a release posted just before the Redsync is
// destroyed is still written and answered. Loop thread only.
//
// Shared by the engine and the callbacks of the commands it tracks: an engine
// destroyed on its own (application-owned) loop thread returns at once, and
// the drain lives on until it has run `then`.

#include "transport/loop_timer.hpp"
#include "transport/node_pool.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

namespace redsync::detail {

class cleanup_drain : public std::enable_shared_from_this<cleanup_drain> {
 public:
  // `done` wrapped so the drain counts the command until it completes.
  command_callback track(command_callback done) {
    ++pending_;
    return [self = shared_from_this(), done = std::move(done)](command_result&& r) mutable {
      done(std::move(r));
      self->settle();
    };
  }

  // Runs `then` once no tracked command is pending (at once if none is), or
  // after `bound`, whichever comes first; exactly once.
  void wait(uv_loop_t* loop, std::chrono::milliseconds bound, std::function<void()> then) {
    then_ = std::move(then);
    if (pending_ == 0 || bound <= std::chrono::milliseconds::zero()) return fire();
    timer_ = loop_timer::create(loop);
    timer_->start(bound, [self = shared_from_this()] { self->fire(); });
  }

 private:
  void settle() {
    if (--pending_ == 0 && then_) fire();
  }

  void fire() {
    if (timer_) {
      timer_->close();
      timer_ = nullptr;
    }
    auto then = std::move(then_);
    then_ = nullptr;
    if (then) then();
  }

  std::size_t pending_ = 0;
  std::function<void()> then_;
  loop_timer* timer_ = nullptr;
};

}  // namespace redsync::detail
