#pragma once

// Acquiring a permit of a Semaphore: acquire() (tries with retries, woken by
// releases) and try_acquire() (one attempt). semaphore_acquisition.cpp.

#include "redlock/engine/bounded_operation.hpp"
#include "redlock/semaphore/semaphore_state.hpp"

#include <redsync/semaphore.hpp>

#include <functional>
#include <memory>

namespace redsync::detail {

// Caller's thread. `blocking`: acquire() rather than try_acquire(). `done`
// runs once, on the loop thread, never inside this call.
void submit_acquisition(std::shared_ptr<semaphore_state> st, bool blocking, const context& ctx,
                        std::function<void(acquire_result)> done);

}  // namespace redsync::detail
