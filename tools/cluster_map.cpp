#include "cluster_map.hpp"

#include <fmt/format.h>

namespace redsync::cli {
namespace {

// The library's parser reads its own reply type; the probes' is the same
// tree under other names.
detail::reply as_reply(const probe_reply& r) {
  using in = probe_reply::kind;
  using out = detail::reply::kind;
  detail::reply o;
  switch (r.type) {
    case in::status: o.type = out::status; break;
    case in::error: o.type = out::error; break;
    case in::string: o.type = out::string; break;
    case in::integer: o.type = out::integer; break;
    case in::array: o.type = out::array; break;
    case in::nil:
    case in::other: o.type = out::nil; break;
  }
  o.str = r.str;
  o.integer = r.integer;
  for (const auto& e : r.elements) o.elements.push_back(as_reply(e));
  return o;
}

std::string label_of(const member_options& m) {
  const bool tls = !m.seeds.empty() && m.seeds.front().tls.enabled;
  std::string out = tls ? "rediss+cluster://" : "redis+cluster://";
  for (std::size_t i = 0; i < m.seeds.size(); ++i) out += (i == 0 ? "" : ",") + m.seeds[i].address();
  return out;
}

// The map from one seed's replies to CLUSTER SHARDS and CLUSTER SLOTS
// (pipelined together: a server without SHARDS costs no second round trip).
std::optional<detail::slot_map> map_from(const node_options& seed, const probe_result& r,
                                         std::string& error) {
  if (!r.up) {
    error = r.error;
    return std::nullopt;
  }
  if (auto m = detail::parse_cluster_shards(as_reply(r.replies.at(0)), seed.host, seed.tls.enabled, error))
    return m;
  return detail::parse_cluster_slots(as_reply(r.replies.at(1)), seed.host, error);
}

// A reply that sends the command elsewhere.
std::optional<detail::redirect> redirect_in(const probe_result& r) {
  if (!r.up) return std::nullopt;
  for (const auto& reply : r.replies) {
    if (reply.type != probe_reply::kind::error) continue;
    if (auto to = detail::parse_redirect(reply.str)) return to;
  }
  return std::nullopt;
}

}  // namespace

node_options cluster_view::master(std::size_t i) const {
  node_options o = member.seeds.front();
  o.host = map->masters.at(i).host;
  o.port = map->masters.at(i).port;
  o.unix_path.clear();
  return o;
}

cluster_view discover_cluster(const std::string& uri, std::chrono::milliseconds timeout) {
  cluster_view v;
  v.member = member_options::parse(uri);
  v.label = label_of(v.member);
  const auto results = probe_nodes(v.member.seeds, {{"CLUSTER", "SHARDS"}, {"CLUSTER", "SLOTS"}}, timeout);
  for (std::size_t i = 0; i < results.size(); ++i) {
    std::string error;
    v.map = map_from(v.member.seeds[i], results[i], error);
    if (v.map) {
      v.error.clear();
      return v;
    }
    v.error += fmt::format("{}seed {}: {}", v.error.empty() ? "" : "; ", results[i].address, error);
    v.refused = v.refused || results[i].refused;
    v.tls_refused = v.tls_refused || results[i].tls_refused;
  }
  return v;
}

slot_ranges unserved_slots(const detail::slot_map& map, const std::vector<bool>& up) {
  slot_ranges out;
  for (std::size_t s = 0; s < map.owner.size(); ++s) {
    const std::int32_t o = map.owner[s];
    if (o != detail::slot_map::no_master && up.at(static_cast<std::size_t>(o))) continue;
    const auto slot = static_cast<std::uint16_t>(s);
    if (!out.empty() && out.back().second + 1 == slot) {
      out.back().second = slot;
    } else {
      out.emplace_back(slot, slot);
    }
  }
  return out;
}

std::string ranges_text(const slot_ranges& ranges) {
  std::string out;
  for (const auto& [first, last] : ranges) {
    out += out.empty() ? "" : ", ";
    out += first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last);
  }
  return out;
}

std::string ranges_json(const slot_ranges& ranges) {
  std::string out;
  for (const auto& [first, last] : ranges)
    out += fmt::format("{}[{},{}]", out.empty() ? "" : ",", first, last);
  return "[" + out + "]";
}

probe_result probe_slot(const cluster_view& view, std::uint16_t slot,
                        const std::vector<std::vector<std::string>>& commands,
                        std::chrono::milliseconds timeout) {
  const auto named = [&](probe_result r) {
    r.address = fmt::format("{} (slot {} on {})", view.label, slot, r.address);
    return r;
  };
  probe_result down;  // no master to ask
  down.address = view.label;
  if (!view.map) {
    down.error = "no slot map: " + view.error;
    down.refused = view.refused;
    down.tls_refused = view.tls_refused;
    return down;
  }
  const std::int32_t owner = view.map->owner.at(slot);
  if (owner == detail::slot_map::no_master) {
    down.error = fmt::format("no master serves slot {}", slot);
    return down;
  }
  node_options at = view.master(static_cast<std::size_t>(owner));
  probe_result r = probe_nodes({at}, commands, timeout).at(0);
  const auto to = redirect_in(r);
  if (!to) return named(std::move(r));
  // One redirection: the slot moved (MOVED) or is moving (ASK) since the
  // map was read. ASKING lets the importing master answer the next command
  // only, so it goes before each.
  if (!to->host.empty()) at.host = to->host;
  at.port = to->port;
  std::vector<std::vector<std::string>> again;
  for (const auto& c : commands) {
    if (to->ask) again.push_back({"ASKING"});
    again.push_back(c);
  }
  r = probe_nodes({at}, again, timeout).at(0);
  if (to->ask && r.up) {
    std::vector<probe_reply> answers;
    for (std::size_t i = 1; i < r.replies.size(); i += 2) answers.push_back(std::move(r.replies[i]));
    r.replies = std::move(answers);
  }
  return named(std::move(r));
}

}  // namespace redsync::cli
