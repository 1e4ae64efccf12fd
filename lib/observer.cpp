// The observer's default (empty) handlers and the names of its enums.

#include <redsync/observer.hpp>

namespace redsync {

observer::~observer() = default;
void observer::on_acquire(const acquire_event&) {}
void observer::on_release(const release_event&) {}
void observer::on_extend(const extend_event&) {}
void observer::on_lost(const lost_event&) {}
void observer::on_permit_acquire(const permit_acquire_event&) {}
void observer::on_permit_release(const permit_release_event&) {}
void observer::on_permit_extend(const permit_extend_event&) {}
void observer::on_permit_lost(const permit_lost_event&) {}
void observer::on_node(const node_event&) {}

std::string_view to_string(log_level l) noexcept {
  switch (l) {
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warning: return "warning";
    case log_level::error: return "error";
  }
  return "unknown";
}

std::string_view to_string(node_state s) noexcept {
  switch (s) {
    case node_state::connected: return "connected";
    case node_state::unreachable: return "unreachable";
    case node_state::reconnected: return "reconnected";
    case node_state::excluded: return "excluded";
    case node_state::voting: return "voting";
    case node_state::failover: return "failover";
  }
  return "unknown";
}

}  // namespace redsync
