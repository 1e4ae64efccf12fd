#include <redsync/error.hpp>

#include <fmt/format.h>

namespace redsync {

namespace {

class redsync_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "redsync"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::busy: return "lock is held by another holder";
      case errc::no_quorum: return "no quorum: too few nodes agreed";
      case errc::validity_elapsed: return "quorum reached but the validity time had already elapsed";
      case errc::expired: return "lock already expired";
      case errc::taken: return "lock is taken by another holder on some nodes";
      case errc::cancelled: return "cancelled";
      case errc::deadline_exceeded: return "deadline exceeded";
      case errc::lost: return "lock was lost while held";
      case errc::not_held: return "lock is not held by this mutex";
      case errc::would_deadlock: return "blocking call on the loop thread would deadlock";
      case errc::shutting_down: return "Redsync is shutting down";
      case errc::already_held: return "this mutex already holds the lock (mutexes are not reentrant)";
    }
    return fmt::format("unknown redsync error {}", ev);
  }
};

}  // namespace

const std::error_category& category() noexcept {
  static const redsync_category c;
  return c;
}

std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

std::string_view to_string(node_status s) noexcept {
  switch (s) {
    case node_status::ok: return "ok";
    case node_status::taken: return "taken";
    case node_status::missing: return "missing";
    case node_status::reply_error: return "reply_error";
    case node_status::timeout: return "timeout";
    case node_status::unreachable: return "unreachable";
    case node_status::not_awaited: return "not_awaited";
    case node_status::excluded: return "excluded";
  }
  return "unknown";
}

bool result::busy() const noexcept {
  return error == errc::busy;
}

std::vector<std::string> result::nodes_with(node_status s) const {
  std::vector<std::string> out;
  for (const auto& n : nodes) {
    if (n.status == s) out.push_back(n.address);
  }
  return out;
}

std::string result::describe() const {
  std::string out = error ? error.message() : std::string("ok");
  if (attempts > 1) out += fmt::format(" after {} attempts", attempts);
  out += fmt::format(" in {:.3f} ms", static_cast<double>(elapsed.count()) / 1000.0);
  if (!nodes.empty()) {
    out += " [";
    bool first = true;
    for (const auto& n : nodes) {
      if (!first) out += ", ";
      first = false;
      out += fmt::format("{} {} {}us", n.address, to_string(n.status), n.latency.count());
      if (!n.message.empty()) out += fmt::format(" ({})", n.message);
    }
    out += "]";
  }
  return out;
}

lock_error::lock_error(result r)
    : std::system_error(r.error ? r.error : make_error_code(errc::no_quorum), r.describe()),
      result_(std::move(r)) {}

}  // namespace redsync
