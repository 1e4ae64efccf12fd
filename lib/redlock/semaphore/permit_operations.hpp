#pragma once

// A holder's steps on its permit: release and extend (by hand, or from its
// watchdog). Caller's thread in, loop thread out (permit_operations.cpp).

#include "redlock/semaphore/semaphore_state.hpp"

#include <redsync/context.hpp>
#include <redsync/error.hpp>

#include <functional>
#include <memory>

namespace redsync::detail {

// `automatic`: the watchdog's extension, refused once the watchdog stopped
// (a release started, or the loss was declared).
enum class extension_kind { by_hand, automatic };

// `done` runs once on the loop thread (never inside this call); may be
// empty (a permit destroyed while held releases in the background).
void submit_release(std::shared_ptr<permit_state> p, const context& ctx, std::function<void(result)> done);
void submit_extend(std::shared_ptr<permit_state> p, const context& ctx, std::function<void(result)> done,
                   extension_kind kind = extension_kind::by_hand);

}  // namespace redsync::detail
