// A mutex's events: counted, logged (a lost lock) and told to the observer.

#include "redlock/mutex/mutex_state.hpp"
#include "redlock/telemetry_notify.hpp"

#include <fmt/format.h>

#include <span>
#include <string>

namespace redsync::detail {

namespace {

std::string names_of(std::span<const std::string> names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

bool shared(const mutex_state& st) {
  return st.kind == hold_kind::shared;
}

}  // namespace

void telemetry::acquisition(const mutex_state& st, bool blocking, const result& r) {
  acquisitions_.add(r);
  if (!observer_) return;
  fencing_token token{};
  if (r.ok()) {
    std::lock_guard lk(st.mu);
    token = st.token;
  }
  notify([&](observer& o) {
    o.on_acquire(
        {.names = st.names, .blocking = blocking, .outcome = r, .token = token, .shared = shared(st)});
  });
}

void telemetry::release(const mutex_state& st, const result& r) {
  releases_.add(r);
  notify([&](observer& o) { o.on_release({.names = st.names, .outcome = r, .shared = shared(st)}); });
}

void telemetry::extension(const mutex_state& st, bool automatic, const result& r) {
  extensions_.add(r);
  notify([&](observer& o) {
    o.on_extend({.names = st.names, .automatic = automatic, .outcome = r, .shared = shared(st)});
  });
}

void telemetry::lost(const mutex_state& st, const result& r) {
  lost_.fetch_add(1, std::memory_order_relaxed);
  if (logging())
    log(log_level::warning, fmt::format("redsync: lock \"{}\": {}", names_of(st.names), r.describe()));
  notify([&](observer& o) { o.on_lost({.names = st.names, .outcome = r, .shared = shared(st)}); });
}

}  // namespace redsync::detail
