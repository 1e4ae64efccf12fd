#include "cluster_ping.hpp"

#include "json.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redsync::cli {
namespace {

bool pinged(const probe_result& r) {
  return r.up && !r.replies.empty() && r.replies.front().type == probe_reply::kind::status;
}

std::string why_down(const probe_result& r) {
  if (!r.up) return r.error;
  return r.replies.empty() ? std::string("no answer") : r.replies.front().str;
}

slot_ranges slots_of(const cluster_ping& p, std::size_t master) {
  return slot_ranges(p.view.map->masters.at(master).slots.begin(),
                     p.view.map->masters.at(master).slots.end());
}

// The masters in the order of their first slot (the map keeps the order the
// server listed them in), for people and scripts to read alike.
std::vector<std::size_t> by_first_slot(const cluster_ping& p) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < p.masters.size(); ++i) order.push_back(i);
  const auto first = [&](std::size_t i) {
    const auto& slots = p.view.map->masters.at(i).slots;
    return slots.empty() ? std::uint32_t{65536} : std::uint32_t{slots.front().first};
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return first(a) < first(b); });
  return order;
}

}  // namespace

cluster_ping ping_cluster(const std::string& uri, std::chrono::milliseconds timeout) {
  cluster_ping p{.view = discover_cluster(uri, timeout)};
  if (!p.view.map) {
    p.error = "no slot map: " + p.view.error;
    p.auth_refused = p.view.refused;
    p.tls_refused = p.view.tls_refused;
    return p;
  }
  std::vector<node_options> masters;
  for (std::size_t i = 0; i < p.view.map->masters.size(); ++i) masters.push_back(p.view.master(i));
  p.masters = probe_nodes(masters, {{"PING"}}, timeout);
  for (const auto& r : p.masters) {
    p.master_up.push_back(pinged(r));
    p.auth_refused = p.auth_refused || r.refused;
    p.tls_refused = p.tls_refused || r.tls_refused;
  }
  p.unserved = unserved_slots(*p.view.map, p.master_up);
  p.up = p.unserved.empty();
  if (!p.up) {
    std::string masters_down;
    for (std::size_t i = 0; i < p.masters.size(); ++i)
      if (!p.master_up[i]) masters_down += (masters_down.empty() ? "" : ", ") + p.masters[i].address;
    p.error = fmt::format("slots {} have no master that answers{}", ranges_text(p.unserved),
                          masters_down.empty() ? std::string(" (no master serves them)")
                                               : fmt::format(" (down: {})", masters_down));
  }
  return p;
}

std::vector<std::string> same_clusters(const std::vector<cluster_ping>& pings,
                                       const std::vector<std::size_t>& numbers) {
  // A master's name for this comparison: its node id, else its address.
  const auto names = [](const cluster_ping& p) {
    std::vector<std::string> out;
    if (!p.view.map) return out;
    for (const auto& m : p.view.map->masters)
      out.push_back(!m.id.empty() ? m.id : node_options{.host = m.host, .port = m.port}.address());
    return out;
  };
  std::vector<std::vector<std::string>> masters;
  for (const auto& p : pings) masters.push_back(names(p));
  std::vector<std::string> out(pings.size());
  for (std::size_t i = 0; i < pings.size(); ++i) {
    for (std::size_t j = 0; j < i && out[i].empty(); ++j) {
      const auto shared =
          std::find_first_of(masters[i].begin(), masters[i].end(), masters[j].begin(), masters[j].end());
      if (shared == masters[i].end()) continue;
      // A node id is 40 hex digits: its first 8 name it, as run_ids are shown.
      const std::string master =
          shared->find(':') == std::string::npos ? "id " + shared->substr(0, 8) : "at " + *shared;
      out[i] = fmt::format(
          "node {} ({}) is the same cluster as node {} ({}) (master {} in both): one cluster must not vote "
          "twice, so this node never votes; list each cluster once",
          numbers[i], pings[i].view.label, numbers[j], pings[j].view.label, master);
    }
  }
  return out;
}

std::string cluster_ping_text(const cluster_ping& p) {
  std::string out;
  const std::string never = p.never.empty() ? std::string() : "; never votes: " + p.never;
  if (p.up) {
    out = fmt::format("{}: up, {} masters serve every slot{}\n", p.view.label, p.masters.size(), never);
  } else if (p.auth_refused) {
    // As a standalone node that refuses the credentials: it answered.
    out = fmt::format("{}: up, auth refused ({})\n", p.view.label, p.error);
  } else {
    out = fmt::format("{}: down ({}){}\n", p.view.label, p.error, never);
  }
  for (const std::size_t i : by_first_slot(p)) {
    const probe_result& r = p.masters[i];
    const std::string slots = ranges_text(slots_of(p, i));
    if (p.master_up[i]) {
      out += fmt::format("  master {}: up, {} us, slots {}\n", r.address, r.first_reply.count(), slots);
    } else {
      out += fmt::format("  master {}: down ({}), slots {}\n", r.address, why_down(r), slots);
    }
  }
  return out;
}

std::string cluster_ping_json(const cluster_ping& p) {
  std::string masters;
  for (const std::size_t i : by_first_slot(p)) {
    const probe_result& r = p.masters[i];
    const bool up = p.master_up[i];
    masters += fmt::format(R"({}{{"address":{},"up":{},"round_trip_us":{},"error":{},"slots":{}}})",
                           masters.empty() ? "" : ",", json_string(r.address), json_bool(up),
                           up ? fmt::format("{}", r.first_reply.count()) : "null",
                           up ? "null" : json_string(why_down(r)), ranges_json(slots_of(p, i)));
  }
  // The fields of a standalone node's entry first (a member's vote is read
  // per slot: `status NAME` shows it), then the member's own.
  // "vote" is "never" for a cluster listed twice.
  return fmt::format(
      R"({{"address":{},"up":{},"round_trip_us":null,"error":{},"vote":{},"vote_reason":{},"votes_in_ms":null,)"
      R"("auth_refused":{},"cluster":true,"unserved_slots":{},"masters":{}}})",
      json_string(p.view.label), json_bool(p.up || p.auth_refused), p.up ? "null" : json_string(p.error),
      p.never.empty() ? "null" : json_string("never"),
      json_string(p.never.empty() ? "a cluster member votes per slot: redsync status NAME shows a name's"
                                  : p.never),
      json_bool(p.auth_refused), p.view.map ? ranges_json(p.unserved) : "null",
      p.view.map ? "[" + masters + "]" : "null");
}

}  // namespace redsync::cli
