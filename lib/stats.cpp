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

}  // namespace

std::string prometheus_text(const stats_snapshot& s, std::string_view prefix) {
  if (!valid_metric_name(prefix))
    throw config_error(fmt::format("prometheus_text: prefix \"{}\" is not a valid metric name", prefix));
  writer w{{}, prefix};
  // The results each kind of call can end with (lib/redlock/acquisition.cpp,
  // holder_operations.cpp; would_deadlock is answered before any call starts,
  // and is never counted).
  w.calls("acquisitions_total", "Lock acquisitions (lock, try_lock) by result.", s.acquisitions,
          {errc::busy, errc::no_quorum, errc::validity_elapsed, errc::cancelled, errc::deadline_exceeded,
           errc::shutting_down, errc::already_held});
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
          {errc::busy, errc::no_quorum, errc::permits_mismatch, errc::validity_elapsed, errc::cancelled,
           errc::deadline_exceeded, errc::shutting_down});
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
  for (const auto& n : s.nodes) {
    const std::string node = label(n.address);
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < latency_histogram::finite_buckets; ++b) {
      cumulative += n.latency.counts[b];
      const double le = static_cast<double>(latency_histogram::upper_bounds_us[b]) / 1e6;
      w.sample("node_latency_seconds_bucket", fmt::format("node=\"{}\",le=\"{}\"", node, le), cumulative);
    }
    cumulative += n.latency.counts.back();
    w.sample("node_latency_seconds_bucket", fmt::format("node=\"{}\",le=\"+Inf\"", node), cumulative);
    w.sample("node_latency_seconds_sum", fmt::format("node=\"{}\"", node),
             static_cast<double>(n.latency.sum.count()) / 1e6);
    w.sample("node_latency_seconds_count", fmt::format("node=\"{}\"", node), cumulative);
  }
  return std::move(w.out);
}

}  // namespace redsync
