#pragma once

// What a holder does with the lock it acquired: release it, extend it (by
// hand or from the watchdog), or check it is still held. Loop thread,
// through mutex_operation.

#include "redlock/mutex/mutex_operation.hpp"

#include <chrono>
#include <functional>
#include <memory>

namespace redsync::detail {

// `every_hold`: release whatever a reentrant mutex's count says (the
// destructor's release); otherwise an unlock of a reentrant mutex held more
// than once takes one hold and sends nothing.
std::shared_ptr<mutex_operation> make_release(std::shared_ptr<mutex_state> st, context ctx,
                                              std::function<void(result)> done, bool every_hold = false);

// `automatic`: the watchdog's extension (refused once it stopped; its outcome
// is not the mutex's last_result()). `duration`: the TTL it sets, in
// (0, expiry]; zero means the expiry.
std::shared_ptr<mutex_operation> make_extension(std::shared_ptr<mutex_state> st, bool automatic, context ctx,
                                                std::function<void(result)> done,
                                                std::chrono::milliseconds duration = {});

std::shared_ptr<mutex_operation> make_check(std::shared_ptr<mutex_state> st, context ctx,
                                            std::function<void(result)> done);

}  // namespace redsync::detail
