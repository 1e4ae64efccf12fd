// A semaphore's events: counted, logged (a lost permit) and told to the
// observer.

#include "redlock/semaphore/semaphore_state.hpp"
#include "redlock/telemetry_notify.hpp"

#include <fmt/format.h>

namespace redsync::detail {

namespace {

// The identity of a permit; its strings live as long as the permit.
permit_info info_of(const permit_state& p) {
  return {.semaphore = p.sem->name, .permits = p.sem->permits, .id = p.id, .slot = p.slot, .token = p.token};
}

}  // namespace

void telemetry::permit_acquisition(const semaphore_state& sem, const permit_state* p, bool blocking,
                                   const result& r) {
  permit_acquisitions_.add(r);
  // A failed acquisition names only its semaphore: its last attempt's id
  // and slot were never granted.
  permit_info info;
  if (r.ok() && p) {
    info = info_of(*p);
  } else {
    info.semaphore = sem.name;
    info.permits = sem.permits;
  }
  notify([&](observer& o) { o.on_permit_acquire({.permit = info, .blocking = blocking, .outcome = r}); });
}

void telemetry::permit_release(const permit_state& p, const result& r) {
  permit_releases_.add(r);
  notify([&](observer& o) { o.on_permit_release({.permit = info_of(p), .outcome = r}); });
}

void telemetry::permit_extension(const permit_state& p, bool automatic, const result& r) {
  permit_extensions_.add(r);
  notify(
      [&](observer& o) { o.on_permit_extend({.permit = info_of(p), .automatic = automatic, .outcome = r}); });
}

void telemetry::permit_lost(const permit_state& p, const result& r) {
  lost_permits_.fetch_add(1, std::memory_order_relaxed);
  if (logging())
    log(log_level::warning, fmt::format("redsync: permit {} (slot {}) of semaphore \"{}\": {}", p.id, p.slot,
                                        p.sem->name, r.describe()));
  notify([&](observer& o) { o.on_permit_lost({.permit = info_of(p), .outcome = r}); });
}

}  // namespace redsync::detail
