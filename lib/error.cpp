// The redsync error category, names of errors and node statuses, and how a
// result describes itself.

#include <redsync/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

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
      case errc::already_held:
        return "this mutex already holds the lock (reentrant only with mutex_options::reentrant, on the "
               "thread that acquired it)";
      case errc::permits_mismatch: return "the nodes store another number of permits for this semaphore";
      case errc::kind_clash: return "the name is held as the other kind of lock (mutex or semaphore)";
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

std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::busy: return "busy";
    case errc::no_quorum: return "no_quorum";
    case errc::validity_elapsed: return "validity_elapsed";
    case errc::expired: return "expired";
    case errc::taken: return "taken";
    case errc::cancelled: return "cancelled";
    case errc::deadline_exceeded: return "deadline_exceeded";
    case errc::lost: return "lost";
    case errc::not_held: return "not_held";
    case errc::would_deadlock: return "would_deadlock";
    case errc::shutting_down: return "shutting_down";
    case errc::already_held: return "already_held";
    case errc::permits_mismatch: return "permits_mismatch";
    case errc::kind_clash: return "kind_clash";
  }
  return "unknown";
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
  if (!reason.empty()) out += ": " + reason;
  // When nodes that agreed were left out (restart guard, counter repair) and
  // would have made the quorum, that is what stood in the way: say so first.
  if (error == errc::no_quorum) {
    const auto count = [&](node_status s) {
      return static_cast<std::size_t>(
          std::count_if(nodes.begin(), nodes.end(), [s](const node_result& n) { return n.status == s; }));
    };
    const std::size_t excluded = count(node_status::excluded);
    if (excluded > 0 && count(node_status::ok) + excluded >= nodes.size() / 2 + 1)
      out += fmt::format(
          "; {} of the nodes that agreed do not vote yet (restart guard or fencing-counter repair after a "
          "restart or data loss; each node says when it votes again)",
          excluded);
  }
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

std::ostream& operator<<(std::ostream& out, errc e) {
  return out << to_string(e);
}

std::ostream& operator<<(std::ostream& out, const result& r) {
  return out << r.describe();
}

std::ostream& operator<<(std::ostream& out, node_status s) {
  return out << to_string(s);
}

lock_error::lock_error(result r)
    : std::system_error(r.error ? r.error : make_error_code(errc::no_quorum)),
      result_(std::move(r)),
      what_(result_.describe()) {}

const char* lock_error::what() const noexcept {
  return what_.c_str();
}

}  // namespace redsync
