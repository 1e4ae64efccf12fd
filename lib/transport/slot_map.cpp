// Reading CLUSTER SHARDS and CLUSTER SLOTS into a slot map, and MOVED / ASK
// errors into redirections.

#include "transport/slot_map.hpp"

#include <fmt/format.h>

#include <charconv>

namespace redsync::detail {
namespace {

// The value of `field` in a flat RESP2 map (field, value, field, value...).
const reply* field(const reply& m, std::string_view name) {
  if (m.type != reply::kind::array) return nullptr;
  for (std::size_t i = 0; i + 1 < m.elements.size(); i += 2) {
    if (m.elements[i].str == name) return &m.elements[i + 1];
  }
  return nullptr;
}

std::string_view text(const reply* r) {
  return r != nullptr && (r->type == reply::kind::string || r->type == reply::kind::status)
             ? std::string_view(r->str)
             : std::string_view();
}

std::string host_of(std::string_view endpoint, std::string_view asked_host) {
  return endpoint.empty() || endpoint == "?" ? std::string(asked_host) : std::string(endpoint);
}

bool valid_range(long long first, long long last) {
  return first >= 0 && last >= first && last < 16384;
}

void assign(slot_map& m, std::size_t master, long long first, long long last) {
  m.masters[master].slots.emplace_back(static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(last));
  for (long long s = first; s <= last; ++s)
    m.owner[static_cast<std::size_t>(s)] = static_cast<std::int32_t>(master);
}

}  // namespace

std::size_t slot_map::uncovered() const {
  std::size_t n = 0;
  for (const std::int32_t o : owner) n += o == no_master ? 1 : 0;
  return n;
}

std::size_t slot_map::master_at(std::string_view host, int port) {
  for (std::size_t i = 0; i < masters.size(); ++i) {
    if (masters[i].host == host && masters[i].port == port) return i;
  }
  masters.push_back(cluster_master{std::string(host), port, {}, {}, -1});
  return masters.size() - 1;
}

std::optional<slot_map> parse_cluster_shards(const reply& r, std::string_view asked_host, bool tls,
                                             std::string& error) {
  if (r.type != reply::kind::array) {
    error = r.is_error() ? r.str : "CLUSTER SHARDS: not an array";
    return std::nullopt;
  }
  slot_map m;
  for (const reply& shard : r.elements) {
    const reply* slots = field(shard, "slots");
    const reply* nodes = field(shard, "nodes");
    if (slots == nullptr || nodes == nullptr) {
      error = "CLUSTER SHARDS: a shard without slots or nodes";
      return std::nullopt;
    }
    if (!slots->elements.empty()) ++m.shards;
    int replicas = 0;
    for (const reply& node : nodes->elements)
      replicas += text(field(node, "role")) == "replica" && text(field(node, "health")) != "fail" ? 1 : 0;
    for (const reply& node : nodes->elements) {
      if (text(field(node, "role")) != "master" || text(field(node, "health")) != "online") continue;
      const reply* port =
          tls && field(node, "tls-port") != nullptr ? field(node, "tls-port") : field(node, "port");
      if (port == nullptr || port->type != reply::kind::integer) continue;
      const std::string host = host_of(text(field(node, "endpoint")), asked_host);
      const std::size_t i = m.master_at(host, static_cast<int>(port->integer));
      m.masters[i].id = std::string(text(field(node, "id")));
      m.masters[i].replicas = replicas;
      for (std::size_t k = 0; k + 1 < slots->elements.size(); k += 2) {
        const long long first = slots->elements[k].integer;
        const long long last = slots->elements[k + 1].integer;
        if (!valid_range(first, last)) {
          error = fmt::format("CLUSTER SHARDS: bad slot range {}-{}", first, last);
          return std::nullopt;
        }
        assign(m, i, first, last);
      }
      break;  // one master per shard
    }
  }
  return m;
}

std::optional<slot_map> parse_cluster_slots(const reply& r, std::string_view asked_host, std::string& error) {
  if (r.type != reply::kind::array) {
    error = r.is_error() ? r.str : "CLUSTER SLOTS: not an array";
    return std::nullopt;
  }
  slot_map m;
  for (const reply& range : r.elements) {
    if (range.elements.size() < 3 || range.elements[2].elements.size() < 2) {
      error = "CLUSTER SLOTS: a range without a master";
      return std::nullopt;
    }
    const long long first = range.elements[0].integer;
    const long long last = range.elements[1].integer;
    if (!valid_range(first, last)) {
      error = fmt::format("CLUSTER SLOTS: bad slot range {}-{}", first, last);
      return std::nullopt;
    }
    const reply& master = range.elements[2];
    const std::size_t i = m.master_at(host_of(master.elements[0].str, asked_host),
                                      static_cast<int>(master.elements[1].integer));
    if (master.elements.size() > 2) m.masters[i].id = master.elements[2].str;
    // Every range of a master lists the same replicas.
    m.masters[i].replicas = static_cast<int>(range.elements.size() - 3);
    assign(m, i, first, last);
  }
  m.shards = m.masters.size();
  return m;
}

std::optional<redirect> parse_redirect(std::string_view error) {
  redirect r;
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  const auto s = std::from_chars(error.data(), error.data() + space, slot);
  if (s.ec != std::errc() || s.ptr != error.data() + space || slot >= 16384) return std::nullopt;
  r.slot = static_cast<std::uint16_t>(slot);
  const std::string_view endpoint = error.substr(space + 1);
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto p = std::from_chars(endpoint.data() + colon + 1, endpoint.data() + endpoint.size(), r.port);
  if (p.ec != std::errc() || p.ptr != endpoint.data() + endpoint.size() || r.port <= 0 || r.port > 65535) {
    return std::nullopt;
  }
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  r.host = std::string(host);
  return r;
}

}  // namespace redsync::detail
