#pragma once

// Sends a release (compare-and-delete of our value) to one node, again and
// again while it may not have reached the node. Loop thread only.

#include "redlock/engine/engine.hpp"
#include "redlock/scripts/scripts.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace redsync::detail {

// Sends `call` to `pool` on `route`. Without a reply (a timeout, a dropped
// connection, a failed connect or backoff) it is sent again every
// `retry_every` until the node replies, `give_up_at` passes, `wanted()`
// turns false, or the engine shuts down. `first` gets the outcome of the
// first send only (a round reports on it; the retries are background work).
// Every send is tracked by the engine's shutdown drain.
void send_release(engine& eng, member_slot pool, std::uint64_t route, const script_call& call,
                  std::chrono::microseconds timeout, std::chrono::steady_clock::time_point give_up_at,
                  std::function<bool()> wanted, command_callback first);
// The same with `wanted` shared by the sends of one release (one copy per
// release instead of one per node; an empty or null `wanted` = always).
void send_release(engine& eng, member_slot pool, std::uint64_t route, const script_call& call,
                  std::chrono::microseconds timeout, std::chrono::steady_clock::time_point give_up_at,
                  std::shared_ptr<const std::function<bool()>> wanted, command_callback first);

}  // namespace redsync::detail
