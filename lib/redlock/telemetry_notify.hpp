// telemetry::notify, for the files that define telemetry's events: an
// observer callback runs inside it, and what it throws is counted and
// logged, never passed on to the loop.
#pragma once

#include "redlock/telemetry.hpp"

#include <fmt/format.h>

#include <exception>

namespace redsync::detail {

template <class F>
void telemetry::notify(F&& call) noexcept {
  if (!observer_) return;
  try {
    call(*observer_);
  } catch (const std::exception& e) {
    observer_errors_.fetch_add(1, std::memory_order_relaxed);
    if (logging()) log(log_level::error, fmt::format("redsync: an observer callback threw: {}", e.what()));
  } catch (...) {
    observer_errors_.fetch_add(1, std::memory_order_relaxed);
    if (logging()) log(log_level::error, "redsync: an observer callback threw a non-standard exception");
  }
}

}  // namespace redsync::detail
