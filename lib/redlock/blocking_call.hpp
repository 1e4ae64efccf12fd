#pragma once

// A blocking call: an operation submitted from the caller's thread and its
// outcome waited for there. When the loop can be lent to the caller
// (event_loop::borrow), the caller runs it itself until the outcome is in:
// the operation is queued without waking anyone, and the outcome is handed
// over without a futex. Otherwise (another thread runs the loop, or it is
// the application's) the caller posts the operation and sleeps on a handoff.

#include "transport/event_loop.hpp"
#include "util/handoff.hpp"

#include <memory>
#include <utility>

namespace redsync::detail {

// `submit(done)` starts the operation; `done(T)` is called once, on the
// loop, with its outcome. `dropped` is the outcome if `done` is destroyed
// without being called (a task dropped while the Redsync shuts down), so
// the caller never sleeps forever.
template <class T, class Submit>
T call_blocking(event_loop& loop, Submit&& submit, T dropped) {
  struct giver {
    std::shared_ptr<handoff<T>> slot;
    T dropped;
    giver(std::shared_ptr<handoff<T>> s, T d) : slot(std::move(s)), dropped(std::move(d)) {}
    giver(const giver&) = delete;
    giver& operator=(const giver&) = delete;
    ~giver() {
      if (!slot->given()) slot->give(std::move(dropped));
    }
  };
  auto slot = std::make_shared<handoff<T>>();
  {
    event_loop::borrow lent(loop);
    {
      auto g = std::make_shared<giver>(slot, std::move(dropped));
      submit([g](T r) { g->slot->give(std::move(r)); });
    }
    lent.run_until([&slot] { return slot->ready(); });
  }
  return slot->take();
}

}  // namespace redsync::detail
