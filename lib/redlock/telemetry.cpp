// Counters, observer events and log messages of one Redsync.

#include "redlock/telemetry.hpp"

#include "redlock/telemetry_notify.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

namespace redsync::detail {

namespace {

constexpr auto relaxed = std::memory_order_relaxed;

}  // namespace

void telemetry::counts_cell::add(const result& r) noexcept {
  if (!r.error) {
    ok.fetch_add(1, relaxed);
    return;
  }
  const auto v = static_cast<std::size_t>(r.error.value());
  failed[v < failed.size() ? v : 0].fetch_add(1, relaxed);
}

call_counts telemetry::counts_cell::read() const noexcept {
  call_counts c;
  c.ok = ok.load(relaxed);
  for (std::size_t i = 0; i < failed.size(); ++i) c.failed[i] = failed[i].load(relaxed);
  return c;
}

telemetry::telemetry(std::vector<std::string> addresses, std::shared_ptr<observer> obs, log_hook log)
    : nodes_(std::make_unique<node_cell[]>(addresses.size())),
      size_(addresses.size()),
      observer_(std::move(obs)),
      log_(std::move(log)) {
  for (std::size_t i = 0; i < size_; ++i) nodes_[i].address = std::move(addresses[i]);
}

stats_snapshot telemetry::snapshot() const {
  stats_snapshot s;
  s.acquisitions = acquisitions_.read();
  s.releases = releases_.read();
  s.extensions = extensions_.read();
  s.lost_locks = lost_.load(relaxed);
  s.permit_acquisitions = permit_acquisitions_.read();
  s.permit_releases = permit_releases_.read();
  s.permit_extensions = permit_extensions_.read();
  s.lost_permits = lost_permits_.load(relaxed);
  s.observer_errors = observer_errors_.load(relaxed);
  s.nodes.resize(size_);
  for (std::size_t i = 0; i < size_; ++i) {
    const node_cell& c = nodes_[i];
    node_stats& n = s.nodes[i];
    n.address = c.address;
    n.connected = c.connected.load(relaxed);
    n.excluded = c.excluded.load(relaxed);
    n.reconnects = c.reconnects.load(relaxed);
    n.unreachable = c.unreachable.load(relaxed);
    for (std::size_t k = 0; k < n.answers.size(); ++k) n.answers[k] = c.answers[k].load(relaxed);
    n.script_loads = c.script_loads.load(relaxed);
    n.script_reloads = c.script_reloads.load(relaxed);
    for (std::size_t k = 0; k < n.latency.counts.size(); ++k)
      n.latency.counts[k] = c.latency[k].load(relaxed);
    n.latency.sum = std::chrono::microseconds{c.latency_sum_us.load(relaxed)};
    if (c.shards) read_shards(c, n);
  }
  return s;
}

void telemetry::log(log_level level, const std::string& message) noexcept {
  if (!log_) return;
  try {
    log_(level, message);
  } catch (...) {
    observer_errors_.fetch_add(1, relaxed);
  }
}

void telemetry::answer(std::size_t i, node_status s, std::chrono::microseconds latency,
                       std::string_view shard) noexcept {
  node_cell& c = nodes_[i];
  const auto k = static_cast<std::size_t>(s);
  if (k < c.answers.size()) c.answers[k].fetch_add(1, relaxed);
  shard_cell* sh = c.shards && !shard.empty() ? shard_of(i, shard) : nullptr;
  if (sh && k < sh->answers.size()) sh->answers[k].fetch_add(1, relaxed);
  // An unreachable answer failed without a round trip (often at once, while
  // the pool backs off): its "latency" would drag the histogram down.
  if (s == node_status::unreachable) return;
  const std::size_t b = latency_histogram::bucket_of(latency);
  c.latency[b].fetch_add(1, relaxed);
  c.latency_sum_us.fetch_add(latency.count(), relaxed);
  if (sh) {
    sh->latency[b].fetch_add(1, relaxed);
    sh->latency_sum_us.fetch_add(latency.count(), relaxed);
  }
}

void telemetry::vote(std::size_t i, bool excluded, std::string_view why, std::string_view shard) {
  node_cell& c = nodes_[i];
  if (shard_cell* sh = c.shards && !shard.empty() ? shard_of(i, shard) : nullptr;
      sh && sh->excluded.load(relaxed) != excluded) {
    sh->excluded.store(excluded, relaxed);
    node_changed(i, excluded ? node_state::excluded : node_state::voting, excluded ? why : std::string_view{},
                 shard);
  }
  if (c.excluded.load(relaxed) == excluded) return;
  c.excluded.store(excluded, relaxed);
  node_changed(i, excluded ? node_state::excluded : node_state::voting, excluded ? why : std::string_view{});
}

void telemetry::pool(std::size_t i, pool_event e, std::string_view detail, clock::time_point sent_at) {
  if (closed_) return;
  node_cell& c = nodes_[i];
  switch (e) {
    case pool_event::connected:
      c.connected.store(true, relaxed);
      return node_changed(i, node_state::connected, detail);
    case pool_event::unreachable:
      c.connected.store(false, relaxed);
      c.unreachable.fetch_add(1, relaxed);
      return node_changed(i, node_state::unreachable, detail);
    case pool_event::reconnected: {
      c.connected.store(true, relaxed);
      c.reconnects.fetch_add(1, relaxed);
      const auto now = clock::now();
      c.recent_reconnects.push_back(now);
      while (now - c.recent_reconnects.front() > storm_window) c.recent_reconnects.pop_front();
      if (c.recent_reconnects.size() >= storm_reconnects) {
        c.recent_reconnects.clear();
        if (logging())
          log(log_level::warning,
              fmt::format("redsync: reconnect storm: node {} reconnected {} times within {} s (a flapping "
                          "network, or a server or proxy dropping clients)",
                          c.address, storm_reconnects, storm_window.count()));
      }
      return node_changed(i, node_state::reconnected, detail);
    }
    case pool_event::script_loaded: return script_missing(i, false, detail, sent_at);
    case pool_event::function_loaded: return script_missing(i, true, detail, sent_at);
  }
}

void telemetry::node_changed(std::size_t i, node_state s, std::string_view detail, std::string_view shard) {
  const node_cell& c = nodes_[i];
  if (logging()) {
    const bool bad = s == node_state::unreachable || s == node_state::excluded || s == node_state::failover;
    const log_level level = bad                          ? log_level::warning
                            : s == node_state::connected ? log_level::debug
                                                         : log_level::info;
    const std::string who =
        shard.empty() ? fmt::format("node {}", c.address) : fmt::format("node {} shard {}", c.address, shard);
    std::string message = fmt::format("redsync: {} {}", who, to_string(s));
    if (s == node_state::excluded) message = fmt::format("redsync: {} excluded from the quorum", who);
    if (s == node_state::voting) message = fmt::format("redsync: {} votes again", who);
    if (s == node_state::failover) message = fmt::format("redsync: {} has a new master (failover)", who);
    if (!detail.empty()) message += fmt::format(": {}{}", s == node_state::failover ? "was " : "", detail);
    log(level, message);
  }
  notify([&](observer& o) {
    o.on_node({.node = i, .address = c.address, .state = s, .detail = detail, .shard = shard});
  });
}

void telemetry::script_missing(std::size_t i, bool function, std::string_view sha1,
                               clock::time_point sent_at) {
  node_cell& c = nodes_[i];
  c.script_loads.fetch_add(1, relaxed);
  auto seen = std::find_if(c.loaded.begin(), c.loaded.end(), [&](const auto& l) { return l.first == sha1; });
  const auto now = clock::now();
  if (seen == c.loaded.end()) {
    c.loaded.emplace_back(std::string(sha1), now);
    if (logging())
      log(log_level::debug, fmt::format("redsync: node {}: {} {} loaded on first use", c.address,
                                        function ? "function library" : "script", sha1));
    return;
  }
  // Sent before our last load reached the node: part of that same load.
  if (sent_at < seen->second) return;
  seen->second = now;
  c.script_reloads.fetch_add(1, relaxed);
  if (logging())
    log(log_level::warning,
        function ? fmt::format("redsync: node {} lost function library {} (FUNCTION FLUSH, restart or "
                               "failover): loaded again with FUNCTION LOAD",
                               c.address, sha1)
                 : fmt::format("redsync: node {} answered NOSCRIPT for script {} it had run before (SCRIPT "
                               "FLUSH, restart or failover): sent again with EVAL",
                               c.address, sha1));
}

}  // namespace redsync::detail
