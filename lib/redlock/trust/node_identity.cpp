// Who a node is, from INFO (node_identity.hpp).

#include "redlock/trust/node_identity.hpp"

#include <fmt/format.h>

namespace redsync::detail {

std::string_view info_field(std::string_view info, std::string_view key) {
  std::size_t at = 0;
  while ((at = info.find(key, at)) != std::string_view::npos) {
    if ((at == 0 || info[at - 1] == '\n') && at + key.size() < info.size() && info[at + key.size()] == ':') {
      const auto from = at + key.size() + 1;
      const auto to = info.find_first_of("\r\n", from);
      return info.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from);
    }
    at += key.size();
  }
  return {};
}

std::optional<server_version> redis_version(std::string_view info) {
  std::string_view text = info_field(info, "redis_version");
  int parts[3] = {0, 0, 0};
  for (int k = 0; k < 3 && !text.empty(); ++k) {
    const auto end = text.find('.');
    const std::string_view part = text.substr(0, end);
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    for (const char c : part) parts[k] = parts[k] * 10 + (c - '0');
    if (end == std::string_view::npos) {
      if (k == 0) return std::nullopt;  // "7": not a version string
      text = {};
    } else {
      text.remove_prefix(end + 1);
    }
  }
  if (parts[0] == 0 && parts[1] == 0 && parts[2] == 0) return std::nullopt;
  return server_version{parts[0], parts[1], parts[2]};
}

server_version minimum_version(script_mode mode) noexcept {
  return mode == script_mode::functions ? server_version{7, 0, 0} : server_version{5, 0, 0};
}

std::string cluster_node_problem(std::string_view info, std::size_t number, std::string_view uri) {
  if (info_field(info, "cluster_enabled") != "1") return {};
  constexpr std::string_view why =
      "a lock's keys and the node record hash to different slots on it, so it answers CROSSSLOT and its "
      "vote never counts";
  if (uri.empty()) {
    return fmt::format(
        "the node is a Redis Cluster node (cluster_enabled:1) listed as a standalone node: {}; list the "
        "cluster as one member, redis+cluster://HOST:PORT[,HOST:PORT...]",
        why);
  }
  // rediss://host:port -> rediss+cluster://host:port; a unix socket has no
  // TCP address to offer.
  std::string cluster_uri;
  if (const auto scheme = uri.find("://"); scheme != std::string_view::npos) {
    cluster_uri = fmt::format("{}+cluster{}", uri.substr(0, scheme), uri.substr(scheme));
  } else {
    cluster_uri = "redis+cluster://HOST:PORT";
  }
  return fmt::format(
      "node {} ({}) is a Redis Cluster node (cluster_enabled:1): {}; list it as {} (one member for the whole "
      "cluster; more seeds after commas)",
      number, uri, why, cluster_uri);
}

server_identity identify_server(const reply& info, script_mode mode, listed_as as) {
  server_identity out;
  if (info.is_error()) {
    out.problem = fmt::format(
        "cannot read INFO ({}): redsync needs it (ACL: +info) to detect a restarted or replaced server, so "
        "this node's vote does not count",
        info.str);
    return out;
  }
  // No redis_version (not Redis-like): the checks below decide.
  if (const auto v = redis_version(info.str); v && *v < minimum_version(mode)) {
    const auto need = minimum_version(mode);
    out.problem =
        mode == script_mode::functions
            ? fmt::format(
                  "the node runs Redis {}.{}.{}; redsync_options::script_mode = functions needs Redis >= "
                  "{}.{} (Redis Functions), so its vote does not count; use script_mode::eval for it",
                  v->major, v->minor, v->patch, need.major, need.minor)
            : fmt::format(
                  "the node runs Redis {}.{}.{}; redsync-cpp needs Redis >= {}.{} (its scripts read TIME "
                  "before they write), so its vote does not count",
                  v->major, v->minor, v->patch, need.major, need.minor);
    return out;
  }
  const auto run_id = info_field(info.str, "run_id");
  if (run_id.empty()) {
    out.problem =
        "INFO server has no run_id (a server other than Redis or Valkey?): redsync cannot detect a "
        "restart or replacement of this node, so its vote does not count";
    return out;
  }
  if (const auto role = info_field(info.str, "role"); !role.empty() && role != "master") {
    out.problem = fmt::format(
        "the node is a replica (role:{}): its data follows another server, so its vote does not count; "
        "lock nodes must be independent masters",
        role);
    return out;
  }
  if (as == listed_as::standalone) {
    if (std::string problem = cluster_node_problem(info.str); !problem.empty()) {
      out.problem = std::move(problem);
      return out;
    }
  }
  const auto maxmemory = info_field(info.str, "maxmemory");
  const auto policy = info_field(info.str, "maxmemory_policy");
  if (!maxmemory.empty() && maxmemory != "0" && !policy.empty() && policy != "noeviction") {
    out.problem = fmt::format(
        "maxmemory-policy {} with maxmemory {} may evict lock keys, so this node's vote does not count; "
        "use maxmemory-policy noeviction (or no maxmemory) on lock nodes",
        policy, maxmemory);
    return out;
  }
  // A full resynchronisation (REPLICAOF, then REPLICAOF NO ONE) replaces
  // the data but keeps the run_id; it changes the replication id.
  out.identity.assign(run_id);
  out.run_id.assign(run_id);
  if (const auto replid = info_field(info.str, "master_replid"); !replid.empty()) {
    out.identity += ':';
    out.identity += replid;
  }
  // A load in place (DEBUG RELOAD) keeps both; the key counts of the last
  // load tell one happened (node_identity.hpp says when they cannot).
  const auto loaded = info_field(info.str, "rdb_last_load_keys_loaded");
  const auto expired = info_field(info.str, "rdb_last_load_keys_expired");
  if ((!loaded.empty() && loaded != "0") || (!expired.empty() && expired != "0")) {
    out.identity += fmt::format(":load={}/{}", loaded, expired);
  }
  return out;
}

}  // namespace redsync::detail
