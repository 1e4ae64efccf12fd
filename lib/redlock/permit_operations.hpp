#pragma once

// A holder's steps on its permit: release and extend. Caller's thread in,
// loop thread out (permit_operations.cpp).

#include "redlock/semaphore_state.hpp"

#include <redsync/context.hpp>
#include <redsync/error.hpp>

#include <functional>
#include <memory>

namespace redsync::detail {

// `done` runs once on the loop thread (never inside this call); may be
// empty (a permit destroyed while held releases in the background).
void submit_release(std::shared_ptr<permit_state> p, const context& ctx, std::function<void(result)> done);
void submit_extend(std::shared_ptr<permit_state> p, const context& ctx, std::function<void(result)> done);

}  // namespace redsync::detail
