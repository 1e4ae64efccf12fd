#include "node_vote.hpp"
#include "reply_number.hpp"

#include "human_duration.hpp"

#include "redlock/trust/node_identity.hpp"

#include <redsync/options.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

namespace redsync::cli {
namespace {

using std::chrono::milliseconds;

// The fields of the node record read here (see lib/redlock/scripts/scripts.hpp):
// fencing counter, verified server run, since when (server ms), repair
// mark, longest expiry used on the node (ms).
enum field { fence, run, since, pending, window, fields };

// The library's reader of INFO text (node_identity.cpp is built into the tool).
using redsync::detail::info_field;

// As the library names a node in messages (engine::uri): the scheme and
// address, never the credentials.
std::string shown_uri(const std::string& uri) {
  const node_options o = node_options::parse(uri);
  if (!o.unix_path.empty()) return o.address();
  return (o.tls.enabled ? "rediss://" : "redis://") + o.address();
}

node_vote never(std::string why) {
  return {node_vote::state::never, std::move(why), std::nullopt};
}

}  // namespace

std::vector<std::vector<std::string>> vote_commands(const std::string& record) {
  return {{"INFO"}, {"HMGET", record, "fence", "run", "since", "pending", "window"}, {"TIME"}};
}

const char* to_string(node_vote::state s) {
  switch (s) {
    case node_vote::state::votes: return "votes";
    case node_vote::state::not_yet: return "not_yet";
    case node_vote::state::never: return "never";
    case node_vote::state::unknown: return "unknown";
  }
  return "unknown";
}

std::string vote_suffix(const node_vote& v) {
  switch (v.what) {
    case node_vote::state::votes: return {};
    case node_vote::state::not_yet: return "; does not vote yet: " + v.reason;
    case node_vote::state::never: return "; never votes: " + v.reason;
    case node_vote::state::unknown: return "; vote unknown: " + v.reason;
  }
  return {};
}

std::vector<std::string> same_servers(const std::vector<std::string>& uris,
                                      const std::vector<const probe_reply*>& infos) {
  const auto shown = [&](std::size_t i) { return shown_uri(uris[i]); };
  const auto run_id = [&](std::size_t i) -> std::string_view {
    const probe_reply* info = infos[i];
    if (info == nullptr || info->type != probe_reply::kind::string) return {};
    return info_field(info->str, "run_id");
  };
  std::vector<std::string> out(infos.size());
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const auto id = run_id(i);
    if (id.empty()) continue;
    for (std::size_t j = 0; j < i; ++j) {
      if (run_id(j) != id) continue;
      out[i] = fmt::format(
          "node {} ({}) is the same server as node {} ({}) (run_id {}): one server must not vote twice, so "
          "this node never votes; list each server once",
          i + 1, shown(i), j + 1, shown(j), id.substr(0, 8));
      break;
    }
  }
  return out;
}

std::vector<std::string> cluster_nodes(const std::vector<std::string>& uris,
                                       const std::vector<const probe_reply*>& infos) {
  std::vector<std::string> out(infos.size());
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const probe_reply* info = infos[i];
    if (info == nullptr || info->type != probe_reply::kind::string) continue;
    out[i] = detail::cluster_node_problem(info->str, i + 1, shown_uri(uris[i]));
  }
  return out;
}

node_vote vote_of(const probe_reply& info, const probe_reply& record, const probe_reply& time,
                  milliseconds ttl) {
  using kind = probe_reply::kind;
  // The server's identity, as the library reads it from INFO.
  if (info.type != kind::string) {
    return never(fmt::format("cannot read INFO ({}): redsync needs it (ACL +info) to tell a restarted server",
                             info.type == kind::error ? info.str : "no answer"));
  }
  const std::string_view text = info.str;
  const auto run_id = info_field(text, "run_id");
  if (run_id.empty()) return never("INFO server has no run_id: redsync cannot tell a restarted server");
  if (const auto role = info_field(text, "role"); !role.empty() && role != "master") {
    return never(fmt::format("a replica (role:{}): lock nodes must be independent masters", role));
  }
  const auto maxmemory = info_field(text, "maxmemory");
  const auto policy = info_field(text, "maxmemory_policy");
  if (!maxmemory.empty() && maxmemory != "0" && !policy.empty() && policy != "noeviction") {
    return never(fmt::format("maxmemory-policy {} may evict lock keys", policy));
  }
  std::string identity(run_id);
  if (const auto replid = info_field(text, "master_replid"); !replid.empty()) {
    identity += ':';
    identity += replid;
  }
  // A load in place (DEBUG RELOAD) changes the identity as the library
  // reads it (lib/redlock/trust/node_identity.cpp).
  const auto loaded = info_field(text, "rdb_last_load_keys_loaded");
  const auto expired = info_field(text, "rdb_last_load_keys_expired");
  if ((!loaded.empty() && loaded != "0") || (!expired.empty() && expired != "0")) {
    identity += fmt::format(":load={}/{}", loaded, expired);
  }

  if (record.type != kind::array || record.elements.size() != fields) {
    return {node_vote::state::unknown,
            fmt::format("cannot read its redsync record ({})",
                        record.type == kind::error ? record.str : "unexpected reply"),
            std::nullopt};
  }
  const auto get = [&](field f) -> std::optional<std::string_view> {
    const probe_reply& e = record.elements[f];
    if (e.type != kind::string) return std::nullopt;
    return std::string_view(e.str);
  };
  // The guard window: the longest expiry any client used on the node, or
  // this client's own if longer.
  const milliseconds window_ms =
      std::max(ttl, milliseconds{get(window) ? reply_number(*get(window)).value_or(0) : 0});
  const std::string window_text = human_duration(window_ms);
  // The server's clock (TIME), in ms.
  std::optional<long long> now_ms;
  if (time.type == kind::array && time.elements.size() == 2) {
    const auto secs = reply_number(time.elements[0].str);
    const auto micros = reply_number(time.elements[1].str);
    if (secs && micros) now_ms = *secs * 1000 + *micros / 1000;
  }
  if (get(run) != std::string_view(identity)) {
    // Not verified for this server run: a client that meets it marks it
    // (the mark holds the server time and the run), and any client that
    // locks a guard window or more after that repairs the record, after
    // which it votes (lib/redlock/trust/node_trust.hpp).
    std::string why;
    if (!get(fence) && !get(run)) {
      why = "no redsync record yet (a brand-new node, or it lost its data)";
    } else {
      why = "its redsync record is for another server run (it restarted, was replaced or lost its data)";
    }
    // The mark: "<server ms> <random> <identity>".
    std::optional<long long> marked_ms;
    if (const auto mark = get(pending)) {
      const auto first = mark->find(' ');
      const auto second = first == std::string_view::npos ? first : mark->find(' ', first + 1);
      if (second != std::string_view::npos && mark->substr(second + 1) == identity) {
        marked_ms = reply_number(mark->substr(0, first));
      }
    }
    if (marked_ms && now_ms && *now_ms >= *marked_ms) {
      const milliseconds met{*now_ms - *marked_ms};
      const milliseconds left = window_ms - met;
      why += fmt::format("; a client first met it {} ago: ", human_duration(met));
      why += left.count() > 0
                 ? fmt::format("the first client to lock {} from now or later repairs it, and it then votes",
                               human_duration(left))
                 : std::string("the next client to lock repairs it, and it then votes");
      return {node_vote::state::not_yet, why, std::nullopt};
    }
    why += fmt::format(
        "; the first client to meet it starts a repair, and any client that locks {} or more "
        "after that completes it, and it then votes",
        window_text);
    return {node_vote::state::not_yet, why, std::nullopt};
  }
  // Verified: the restart guard keeps it out until a window has passed since
  // it was first seen unverified (server clock, so every client agrees).
  const auto since_ms = get(since) ? reply_number(*get(since)) : std::nullopt;
  if (!since_ms || !now_ms) return {node_vote::state::votes, {}, std::nullopt};
  if (*since_ms > *now_ms) {
    return {node_vote::state::not_yet,
            fmt::format("restart guard: its clock moved back {} since it was first seen unverified; the next "
                        "client to lock starts its guard window of {} again, and it votes that long after",
                        human_duration(milliseconds{*since_ms - *now_ms}), window_text),
            std::nullopt};
  }
  const milliseconds age{*now_ms - *since_ms};
  const milliseconds left = window_ms - age;
  if (left.count() <= 0) return {node_vote::state::votes, {}, std::nullopt};
  return {node_vote::state::not_yet,
          fmt::format("restart guard: it votes again in {} (a guard window of {} since it was first seen "
                      "unverified)",
                      human_duration(left), window_text),
          left};
}

}  // namespace redsync::cli
