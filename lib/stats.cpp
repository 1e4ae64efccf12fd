// The counters' helpers and their Prometheus text exposition (format 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/).

#include <redsync/stats.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <numeric>

namespace redsync {

std::uint64_t latency_histogram::count() const noexcept {
  return std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
}

std::size_t latency_histogram::bucket_of(std::chrono::microseconds latency) noexcept {
  const auto it = std::lower_bound(upper_bounds_us.begin(), upper_bounds_us.end(), latency.count());
  return static_cast<std::size_t>(it - upper_bounds_us.begin());
}

std::uint64_t call_counts::failures(errc e) const noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < failed.size() ? failed[i] : 0;
}

std::uint64_t call_counts::total_failures() const noexcept {
  return std::accumulate(failed.begin(), failed.end(), std::uint64_t{0});
}

std::uint64_t node_stats::answers_with(node_status s) const noexcept {
  const auto i = static_cast<std::size_t>(s);
  return i < answers.size() ? answers[i] : 0;
}

std::uint64_t node_stats::errors() const noexcept {
  return answers_with(node_status::reply_error) + answers_with(node_status::timeout) +
         answers_with(node_status::unreachable);
}

std::uint64_t shard_stats::answers_with(node_status s) const noexcept {
  const auto i = static_cast<std::size_t>(s);
  return i < answers.size() ? answers[i] : 0;
}

std::uint64_t shard_stats::errors() const noexcept {
  return answers_with(node_status::reply_error) + answers_with(node_status::timeout) +
         answers_with(node_status::unreachable);
}

namespace {

// A label value: backslash, double quote and line feed escaped.
std::string label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool valid_metric_name(std::string_view n) {
  if (n.empty()) return false;
  const auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  };
  if (!letter(n[0])) return false;
  return std::all_of(n.begin(), n.end(), [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

struct writer {
  std::string out;
  std::string_view prefix;

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {}_{} {}\n# TYPE {}_{} {}\n", prefix, name, help, prefix, name, type);
  }
  template <class V>
  void sample(std::string_view name, std::string_view labels, V value) {
    if (labels.empty()) {
      out += fmt::format("{}_{} {}\n", prefix, name, value);
    } else {
      out += fmt::format("{}_{}{{{}}} {}\n", prefix, name, labels, value);
    }
  }

  // Writes ok and each failure in `possible` (always, zeros too, so that a
  // rate() has a series from the start), plus any other failure that was
  // counted all the same: a count is never hidden.
  void calls(std::string_view name, std::string_view help, const call_counts& c,
             std::initializer_list<errc> possible) {
    header(name, "counter", help);
    sample(name, "result=\"ok\"", c.ok);
    for (std::size_t e = 1; e < c.failed.size(); ++e) {
      const std::string_view what = to_string(static_cast<errc>(e));
      if (what == "unknown") continue;
      const bool may_occur =
          std::find(possible.begin(), possible.end(), static_cast<errc>(e)) != possible.end();
      if (may_occur || c.failed[e] != 0) sample(name, fmt::format("result=\"{}\"", what), c.failed[e]);
    }
  }

  // The buckets, sum and count of one histogram; `labels` ends with a comma
  // when not empty.
  void histogram(std::string_view name, const std::string& labels, const latency_histogram& h) {
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < latency_histogram::finite_buckets; ++b) {
      cumulative += h.counts[b];
      const double le = static_cast<double>(latency_histogram::upper_bounds_us[b]) / 1e6;
      sample(fmt::format("{}_bucket", name), fmt::format("{}le=\"{}\"", labels, le), cumulative);
    }
    cumulative += h.counts.back();
    sample(fmt::format("{}_bucket", name), fmt::format("{}le=\"+Inf\"", labels), cumulative);
    const std::string bare = labels.empty() ? std::string() : labels.substr(0, labels.size() - 1);
    sample(fmt::format("{}_sum", name), bare, static_cast<double>(h.sum.count()) / 1e6);
    sample(fmt::format("{}_count", name), bare, cumulative);
  }

  template <class F>
  void per_node(const stats_snapshot& s, std::string_view name, std::string_view type, std::string_view help,
                F value) {
    header(name, type, help);
    for (const auto& n : s.nodes) sample(name, fmt::format("node=\"{}\"", label(n.address)), value(n));
  }
};

constexpr node_status counted_statuses[] = {
    node_status::ok,      node_status::taken,       node_status::missing, node_status::reply_error,
    node_status::timeout, node_status::unreachable, node_status::excluded};

// Per shard (labels node and shard: masters, never slots, so the series
// are as many as the masters) and per cluster member's router.
void write_cluster_members(writer& w, const stats_snapshot& s) {
  const auto per_shard = [&](std::string_view name, std::string_view type, std::string_view help,
                             auto value) {
    w.header(name, type, help);
    for (const auto& n : s.nodes)
      for (const auto& sh : n.shards)
        w.sample(name, fmt::format("node=\"{}\",shard=\"{}\"", label(n.address), label(sh.address)),
                 value(sh));
  };
  per_shard("shard_connected", "gauge", "1 while a connection to the cluster member's master is up.",
            [](const shard_stats& sh) { return sh.connected ? 1 : 0; });
  per_shard("shard_excluded", "gauge", "1 while the master's yes does not count (restart guard, failover).",
            [](const shard_stats& sh) { return sh.excluded ? 1 : 0; });
  per_shard("shard_reconnects_total", "counter", "Connections re-established to the master.",
            [](const shard_stats& sh) { return sh.reconnects; });
  per_shard("shard_unreachable_total", "counter", "Times the master became unreachable.",
            [](const shard_stats& sh) { return sh.unreachable; });
  w.header("shard_answers_total", "counter",
           "A cluster member's answers in lock calls, by master and status.");
  for (const auto& n : s.nodes)
    for (const auto& sh : n.shards)
      for (const node_status st : counted_statuses)
        w.sample("shard_answers_total",
                 fmt::format("node=\"{}\",shard=\"{}\",status=\"{}\"", label(n.address), label(sh.address),
                             to_string(st)),
                 sh.answers_with(st));
  w.header("shard_latency_seconds", "histogram",
           "Latency of a cluster member's answers in lock calls, by master (unreachable ones not counted).");
  for (const auto& n : s.nodes)
    for (const auto& sh : n.shards)
      w.histogram("shard_latency_seconds",
                  fmt::format("node=\"{}\",shard=\"{}\",", label(n.address), label(sh.address)), sh.latency);
  const auto per_cluster = [&](std::string_view name, std::string_view type, std::string_view help,
                               std::initializer_list<std::pair<std::string_view, std::string_view>> kinds,
                               auto value) {
    w.header(name, type, help);
    for (const auto& n : s.nodes) {
      if (!n.cluster) continue;
      if (kinds.size() == 0)
        w.sample(name, fmt::format("node=\"{}\"", label(n.address)), value(n.router, ""));
      for (const auto& [key, kind] : kinds)
        w.sample(name, fmt::format("node=\"{}\",{}=\"{}\"", label(n.address), key, kind),
                 value(n.router, kind));
    }
  };
  per_cluster("cluster_map_reads_total", "counter", "Slot map reads of a cluster member, by result.",
              {{"result", "ok"}, {"result", "failed"}},
              [](const cluster_router_stats& r, std::string_view k) {
                return k == "ok" ? r.map_reads : r.map_read_failures;
              });
  per_cluster("cluster_redirects_total", "counter", "Redirections a cluster member's router followed.",
              {{"kind", "moved"}, {"kind", "ask"}}, [](const cluster_router_stats& r, std::string_view k) {
                return k == "moved" ? r.moved : r.ask;
              });
  per_cluster("cluster_errors_total", "counter", "TRYAGAIN and CLUSTERDOWN answers of a cluster member.",
              {{"kind", "tryagain"}, {"kind", "clusterdown"}},
              [](const cluster_router_stats& r, std::string_view k) {
                return k == "tryagain" ? r.tryagain : r.clusterdown;
              });
  per_cluster("cluster_failovers_total", "counter", "Failovers seen in a cluster member's slot map.", {},
              [](const cluster_router_stats& r, std::string_view) { return r.failovers; });
  per_cluster("cluster_masters", "gauge", "Masters serving slots in a cluster member's last slot map.", {},
              [](const cluster_router_stats& r, std::string_view) { return r.masters; });
}

}  // namespace

std::string prometheus_text(const stats_snapshot& s, std::string_view prefix) {
  if (!valid_metric_name(prefix))
    throw config_error(fmt::format("prometheus_text: prefix \"{}\" is not a valid metric name", prefix));
  writer w{{}, prefix};
  // The results each kind of call can end with (lib/redlock/mutex/acquisition.cpp,
  // holder_operations.cpp; would_deadlock is answered before any call starts,
  // and is never counted).
  w.calls("acquisitions_total", "Lock acquisitions (lock, try_lock) by result.", s.acquisitions,
          {errc::busy, errc::no_quorum, errc::validity_elapsed, errc::cancelled, errc::deadline_exceeded,
           errc::shutting_down, errc::already_held, errc::kind_clash});
  w.calls("releases_total", "Unlocks by result.", s.releases,
          {errc::no_quorum, errc::expired, errc::taken, errc::cancelled, errc::deadline_exceeded, errc::lost,
           errc::not_held, errc::shutting_down});
  w.calls("extensions_total", "Extensions, by hand and automatic, by result.", s.extensions,
          {errc::no_quorum, errc::validity_elapsed, errc::expired, errc::taken, errc::cancelled,
           errc::deadline_exceeded, errc::lost, errc::not_held, errc::shutting_down});
  w.header("lost_locks_total", "counter", "Held locks lost under auto-extension.");
  w.sample("lost_locks_total", "", s.lost_locks);
  // A semaphore's calls (semaphore_acquisition.cpp, permit_operations.cpp).
  w.calls("permit_acquisitions_total", "Permit acquisitions (acquire, try_acquire) by result.",
          s.permit_acquisitions,
          {errc::busy, errc::no_quorum, errc::permits_mismatch, errc::kind_clash, errc::validity_elapsed,
           errc::cancelled, errc::deadline_exceeded, errc::shutting_down});
  w.calls("permit_releases_total", "Permit releases by result.", s.permit_releases,
          {errc::no_quorum, errc::expired, errc::cancelled, errc::deadline_exceeded, errc::lost,
           errc::not_held, errc::shutting_down});
  w.calls("permit_extensions_total", "Permit extensions, by hand and automatic, by result.",
          s.permit_extensions,
          {errc::no_quorum, errc::validity_elapsed, errc::expired, errc::cancelled, errc::deadline_exceeded,
           errc::lost, errc::not_held, errc::shutting_down});
  w.header("lost_permits_total", "counter", "Held permits lost under auto-extension.");
  w.sample("lost_permits_total", "", s.lost_permits);
  w.header("observer_errors_total", "counter", "Exceptions thrown by observer callbacks or the log hook.");
  w.sample("observer_errors_total", "", s.observer_errors);
  w.per_node(s, "node_connected", "gauge", "1 while a connection to the node is up.",
             [](const node_stats& n) { return n.connected ? 1 : 0; });
  w.per_node(s, "node_excluded", "gauge", "1 while the node's yes does not count (restart guard, repair).",
             [](const node_stats& n) { return n.excluded ? 1 : 0; });
  w.per_node(s, "node_reconnects_total", "counter", "Connections re-established to the node.",
             [](const node_stats& n) { return n.reconnects; });
  w.per_node(s, "node_unreachable_total", "counter", "Times the node became unreachable.",
             [](const node_stats& n) { return n.unreachable; });
  w.header("node_answers_total", "counter", "Node answers in lock calls, by status.");
  for (const auto& n : s.nodes) {
    for (const node_status st : counted_statuses) {
      w.sample("node_answers_total",
               fmt::format("node=\"{}\",status=\"{}\"", label(n.address), to_string(st)), n.answers_with(st));
    }
  }
  w.per_node(s, "node_script_loads_total", "counter", "Scripts loaded on the node (first use and reloads).",
             [](const node_stats& n) { return n.script_loads; });
  w.per_node(s, "node_script_reloads_total", "counter", "Scripts the node lost and was given again.",
             [](const node_stats& n) { return n.script_reloads; });
  w.header("node_latency_seconds", "histogram",
           "Latency of node answers in lock calls (unreachable ones not counted).");
  for (const auto& n : s.nodes)
    w.histogram("node_latency_seconds", fmt::format("node=\"{}\",", label(n.address)), n.latency);
  if (std::any_of(s.nodes.begin(), s.nodes.end(), [](const node_stats& n) { return n.cluster; }))
    write_cluster_members(w, s);
  return std::move(w.out);
}

}  // namespace redsync
