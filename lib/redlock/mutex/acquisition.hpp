#pragma once

// Acquiring a Mutex: lock() (tries with retries, waiting in the fair line)
// and try_lock() (one attempt). Loop thread, through mutex_operation.

#include "redlock/mutex/mutex_operation.hpp"

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace redsync::detail {

// `blocking`: lock() (every try, in the waiting line) rather than try_lock()
// (one attempt, never queued). `value` is the value to set. `caller`: the
// thread that started the call (a reentrant mutex's owner re-enters).
std::shared_ptr<mutex_operation> make_acquisition(std::shared_ptr<mutex_state> st, bool blocking, context ctx,
                                                  std::string value, std::function<void(result)> done,
                                                  std::thread::id caller);

}  // namespace redsync::detail
