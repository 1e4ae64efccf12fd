#include "rw_refusal.hpp"

#include "lock_line.hpp"
#include "member_probe.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redsync::cli {
namespace {

// A live writer in one node's line: the waiting line serves readers and
// writers in arrival order, so a reader waits behind it even where readers
// hold the name.
bool writer_waits(const std::vector<probe_reply>& replies) {
  const auto now_ms = server_ms(replies.at(3));
  if (!now_ms) return false;
  std::vector<waiter> line;
  add_line(line, replies.at(1), replies.at(2), *now_ms);
  return std::any_of(line.begin(), line.end(), [](const waiter& w) { return !is_reader_value(w.value); });
}

}  // namespace

std::vector<std::vector<std::string>> rw_refusal_commands(const std::string& name) {
  std::vector<std::vector<std::string>> commands{{"GET", name}};
  for (auto& c : line_commands(name)) commands.push_back(std::move(c));
  commands.push_back({"TIME"});
  return commands;
}

std::optional<std::string> rw_refusal_reason(const std::string& name, bool shared,
                                             const std::vector<probe_reply>& replies) {
  if (replies.size() < 4) return std::nullopt;
  const probe_reply& held = replies[0];
  if (held.type != probe_reply::kind::string && held.type != probe_reply::kind::nil) return std::nullopt;
  const bool by_readers = held.type == probe_reply::kind::string && held.str == readers_mark;
  if (!shared) {
    if (by_readers) return fmt::format("\"{}\" is held by readers", name);
    return std::nullopt;
  }
  // A writer's value never starts with a NUL byte; the marks and a key kept
  // for the head of the line do.
  if (held.type == probe_reply::kind::string && !held.str.empty() && held.str.front() != '\0')
    return fmt::format("\"{}\" is held by a writer", name);
  const bool free_or_kept = held.type == probe_reply::kind::nil || reserved_for(held.str).has_value();
  if (!(by_readers || free_or_kept) || !writer_waits(replies)) return std::nullopt;
  if (by_readers) return fmt::format("\"{}\" is held by readers and a writer waits ahead in its line", name);
  return fmt::format("a writer waits ahead in the line of \"{}\"", name);
}

void explain_rw_refusals(result& r, const std::vector<std::string>& uris, const std::string& name,
                         bool shared, std::chrono::milliseconds timeout) {
  std::vector<std::size_t> plain;  // nodes that refused without a reason
  for (std::size_t i = 0; i < r.nodes.size() && i < uris.size(); ++i)
    if (r.nodes[i].status == node_status::taken && r.nodes[i].message.empty()) plain.push_back(i);
  if (plain.empty()) return;
  std::vector<std::string> refusing;
  for (const std::size_t i : plain) refusing.push_back(uris[i]);
  const auto results = probe_name(
      refusing, name, [](const name_keys& keys) { return rw_refusal_commands(keys.lock); }, timeout);
  for (std::size_t k = 0; k < plain.size() && k < results.size(); ++k) {
    if (!results[k].up) continue;
    if (auto why = rw_refusal_reason(name, shared, results[k].replies)) r.nodes[plain[k]].message = *why;
  }
}

}  // namespace redsync::cli
