#include "acquire_failure.hpp"

#include "exit_status.hpp"
#include "tls_failure.hpp"

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace redsync::cli {
namespace {

// What a node's answer to an attempt means for the tool, in the order the
// reasons are printed.
enum class kind {
  held,       // another holder's value is there
  clash,      // held as the other kind (a mutex's, a semaphore's; readers, a writer): the message says which
  refused,    // authentication, permission or TLS verification: an operator must fix it
  broken,     // an error reply retrying does not fix (WRONGTYPE, READONLY, ...)
  transient,  // an error reply that passes (LOADING, BUSY, OOM)
  down,       // unreachable, timed out, or not awaited
  excluded,   // answered yes, but its vote does not count (yet)
  never,      // the same server as an earlier node of the list, or a cluster node listed as redis://
  yes,        // answered yes and counted
};
constexpr std::size_t kinds = 9;

kind kind_of(const node_result& n) {
  switch (n.status) {
    case node_status::ok:
    case node_status::missing: return kind::yes;
    // The library names the name and the kind in such a refusal's message
    // (round_spec::other_kind), the tool the side of a read-write lock
    // (rw_refusal.hpp); a plain refusal has none.
    case node_status::taken: return n.message.empty() ? kind::held : kind::clash;
    case node_status::excluded:
      // lib/redlock/trust/node_trust.cpp's words for one server under two names,
      // node_identity.cpp's for a Redis Cluster node listed as redis://:
      // both stay so until the node list changes.
      return n.message.find("one server must not vote twice") != std::string::npos ||
                     n.message.find("is a Redis Cluster node (cluster_enabled:1)") != std::string::npos
                 ? kind::never
                 : kind::excluded;
    case node_status::timeout:
    case node_status::unreachable:
      // A certificate that does not verify, or a plaintext URI for a TLS
      // port, fails the same way on every retry.
      return is_tls_refusal(n.message) ? kind::refused : kind::down;
    case node_status::not_awaited: return kind::down;
    case node_status::reply_error: break;
  }
  switch (n.error_class) {
    case server_error::noauth:
    case server_error::wrongpass:
    case server_error::noperm: return kind::refused;
    case server_error::loading:
    case server_error::busy:
    case server_error::oom: return kind::transient;
    case server_error::none:
    case server_error::wrongtype:
    case server_error::readonly:
    case server_error::noscript:
    case server_error::other: return kind::broken;
  }
  return kind::broken;
}

// The library's words for its script mode, in the tool's: the user typed
// --script-mode, not redsync_options::script_mode (node_trust.cpp and
// script_call.cpp name the field in their messages).
std::string script_mode_in_tool_terms(std::string message) {
  constexpr std::pair<std::string_view, std::string_view> names[] = {
      {"redsync_options::script_mode = functions", "--script-mode functions"},
      {"redsync_options::script_mode is functions", "--script-mode is functions"},
      {"script_mode::eval", "--script-mode eval"},
  };
  for (const auto& [field, option] : names) {
    for (auto at = message.find(field); at != std::string::npos;
         at = message.find(field, at + option.size())) {
      message.replace(at, field.size(), option);
    }
  }
  return message;
}

// The reason shown for one node. Authentication failures are worded from
// their class, not from the server's text: a server that needs a password
// and got none may answer a long command with "ERR Protocol error:
// unauthenticated multibulk length" before it would say NOAUTH.
std::string reason_of(const node_result& n) {
  if (n.status == node_status::reply_error) {
    switch (n.error_class) {
      case server_error::noauth:
        return "NOAUTH: the server requires a password; give it in the node URI, "
               "redis://[USER:]PASSWORD@HOST:PORT";
      case server_error::wrongpass: return "WRONGPASS: wrong user name or password in the node URI";
      case server_error::noperm:
        return fmt::format("NOPERM: the ACL user lacks a right redsync needs (docs/acl.md): {}",
                           script_mode_in_tool_terms(n.message));
      default: return n.message.empty() ? std::string("error reply") : script_mode_in_tool_terms(n.message);
    }
  }
  if (n.status == node_status::not_awaited) return "not awaited";
  if (is_tls_refusal(n.message)) return with_tls_hint(n.message);
  if (!n.message.empty()) return script_mode_in_tool_terms(n.message);
  return std::string(to_string(n.status));
}

// "A, B (reason); C (other reason)": nodes with the same reason together.
std::string list_nodes(const std::vector<const node_result*>& nodes, bool with_reasons) {
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (const node_result* n : nodes) {
    std::string reason = with_reasons ? reason_of(*n) : std::string();
    auto it = by_reason.begin();
    while (it != by_reason.end() && it->first != reason) ++it;
    if (it == by_reason.end()) {
      by_reason.push_back({std::move(reason), {n->address}});
    } else {
      it->second.push_back(n->address);
    }
  }
  std::string out;
  for (const auto& [reason, addresses] : by_reason) {
    if (!out.empty()) out += "; ";
    out += fmt::format("{}", fmt::join(addresses, ", "));
    if (!reason.empty()) out += fmt::format(" ({})", reason);
  }
  return out;
}

}  // namespace

std::string never_voting(const result& r) {
  std::vector<const node_result*> never;
  for (const auto& node : r.nodes)
    if (kind_of(node) == kind::never) never.push_back(&node);
  if (never.empty()) return {};
  return fmt::format("{}/{} nodes never vote: {}", never.size(), r.nodes.size(), list_nodes(never, true));
}

acquire_verdict judge_acquisition(const result& r, const acquired_thing& what) {
  acquire_verdict v;
  const std::size_t n = r.nodes.size();
  if (n == 0) {
    v.status = exit_status::unavailable;
    v.why = "no node answered an attempt in time";
    return v;
  }
  const std::size_t quorum = what.quorum > 0 ? what.quorum : n / 2 + 1;
  const std::size_t spare = n - quorum;  // nodes a quorum can do without
  std::array<std::vector<const node_result*>, kinds> of;
  for (const auto& node : r.nodes) of[static_cast<std::size_t>(kind_of(node))].push_back(&node);
  const auto count = [&](kind k) { return of[static_cast<std::size_t>(k)].size(); };

  std::vector<std::string> reasons;
  const auto add = [&](kind k, std::string_view doing, bool with_reasons) {
    if (count(k) == 0) return;
    reasons.push_back(fmt::format("{}/{} nodes {}: {}", count(k), n, doing,
                                  list_nodes(of[static_cast<std::size_t>(k)], with_reasons)));
  };
  // `"jobs" is held as a semaphore on 3/3 nodes`: the library's words;
  // `"jobs" is held by readers on 2/3 nodes` (rw_refusal.hpp). Each wording
  // once, with its nodes, in the order found.
  std::vector<std::pair<std::string_view, std::size_t>> clashes;
  for (const node_result* node : of[static_cast<std::size_t>(kind::clash)]) {
    auto it = clashes.begin();
    while (it != clashes.end() && it->first != node->message) ++it;
    if (it == clashes.end()) {
      clashes.emplace_back(node->message, 1);
    } else {
      ++it->second;
    }
  }
  for (const auto& [message, nodes] : clashes)
    reasons.push_back(fmt::format("{} on {}/{} nodes", message, nodes, n));
  if (count(kind::held) > 0) {
    reasons.push_back(fmt::format("{} on {}/{} nodes", what.held_as, count(kind::held), n));
  }
  add(kind::refused, "refuse", true);
  add(kind::broken, "answer with an error", true);
  add(kind::transient, "answer with an error that should pass", true);
  add(kind::down, "unreachable", true);
  add(kind::excluded, "do not vote yet", true);
  add(kind::never, "never vote", true);
  if (r.error == errc::validity_elapsed) {
    reasons.push_back(
        "a quorum agreed, but too slowly: no validity was left (--ttl too short for these nodes?)");
  }
  if (reasons.empty()) reasons.push_back(r.error ? r.error.message() : std::string("no quorum"));
  v.why = fmt::format("{}", fmt::join(reasons, "; "));

  // Refusals and persistent errors on more nodes than a quorum can spare:
  // waiting cannot help. Otherwise the library's own test for "busy": without
  // the holders, the answering nodes would have made a quorum.
  // A server listed twice, or a cluster node listed as redis://, stays so
  // until the node list changes.
  const std::size_t persistent = count(kind::refused) + count(kind::broken) + count(kind::never);
  // Held as the other kind is held all the same: its holder lets go in time.
  const std::size_t held = count(kind::held) + count(kind::clash);
  const std::size_t unusable = n - count(kind::yes) - held;
  if (persistent > spare) {
    v.hopeless = true;
    v.status = count(kind::refused) > 0 ? exit_status::refused : exit_status::node_errors;
  } else if (r.error == errc::busy || r.error == errc::kind_clash || (held > 0 && unusable <= spare)) {
    v.status = exit_status::not_acquired;
  } else {
    v.status = exit_status::unavailable;
  }
  return v;
}

}  // namespace redsync::cli
