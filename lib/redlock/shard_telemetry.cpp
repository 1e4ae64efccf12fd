// The counters and events of a cluster member's shards (its masters) and of
// its router (telemetry.hpp, docs/observability.md "Cluster members").

#include "redlock/telemetry.hpp"

#include <algorithm>

namespace redsync::detail {

namespace {

constexpr auto shard_relaxed = std::memory_order_relaxed;

}  // namespace

void telemetry::cluster_member(std::size_t i) {
  nodes_[i].shards = std::make_unique<shard_cell[]>(node_stats::max_shards);
}

telemetry::shard_cell* telemetry::shard_of(std::size_t i, std::string_view address) {
  node_cell& c = nodes_[i];
  if (!c.shards) return nullptr;
  // Only the loop thread appends, so its own count is current.
  const std::size_t count = c.shard_count.load(shard_relaxed);
  for (std::size_t k = 0; k < count; ++k)
    if (c.shards[k].address == address) return &c.shards[k];
  if (count == node_stats::max_shards) return nullptr;
  c.shards[count].address = std::string(address);
  // Publishes the address to snapshot(), which reads only cells below the
  // count it loads.
  c.shard_count.store(count + 1, std::memory_order_release);
  return &c.shards[count];
}

void telemetry::read_shards(const node_cell& c, node_stats& n) const {
  n.cluster = true;
  const router_cell& r = c.router;
  n.router = {.map_reads = r.map_reads.load(shard_relaxed),
              .map_read_failures = r.map_read_failures.load(shard_relaxed),
              .moved = r.moved.load(shard_relaxed),
              .ask = r.ask.load(shard_relaxed),
              .tryagain = r.tryagain.load(shard_relaxed),
              .clusterdown = r.clusterdown.load(shard_relaxed),
              .failovers = r.failovers.load(shard_relaxed),
              .masters = r.masters.load(shard_relaxed)};
  const std::size_t count = c.shard_count.load(std::memory_order_acquire);
  n.connected = false;
  for (std::size_t k = 0; k < count; ++k) {
    const shard_cell& cell = c.shards[k];
    if (!cell.active.load(shard_relaxed)) continue;
    shard_stats& sh = n.shards.emplace_back();
    sh.address = cell.address;
    sh.connected = cell.connected.load(shard_relaxed);
    sh.excluded = cell.excluded.load(shard_relaxed);
    sh.reconnects = cell.reconnects.load(shard_relaxed);
    sh.unreachable = cell.unreachable.load(shard_relaxed);
    for (std::size_t a = 0; a < sh.answers.size(); ++a) sh.answers[a] = cell.answers[a].load(shard_relaxed);
    for (std::size_t b = 0; b < sh.latency.counts.size(); ++b)
      sh.latency.counts[b] = cell.latency[b].load(shard_relaxed);
    sh.latency.sum = std::chrono::microseconds{cell.latency_sum_us.load(shard_relaxed)};
    n.connected = n.connected || sh.connected;
  }
}

void telemetry::shard_pool(std::size_t i, const std::string& address, pool_event e, std::string_view detail) {
  if (closed_) return;
  shard_cell* sh = shard_of(i, address);
  if (sh == nullptr) return;
  // A node that never served slots (a replica given as a seed, asked for the
  // map) is counted but not told about: it is no shard.
  node_state told = node_state::connected;
  switch (e) {
    case pool_event::connected:
      if (sh->told_connected) {
        // A fresh pool's first connection (the router retired the old pool
        // when the address left the map, and made a new one when it came
        // back): a reconnect if the old pool was last told unreachable.
        if (sh->connected.exchange(true, shard_relaxed)) return;
        sh->reconnects.fetch_add(1, shard_relaxed);
        told = node_state::reconnected;
        break;
      }
      sh->connected.store(true, shard_relaxed);
      if (!sh->was_master) return;
      sh->told_connected = true;
      break;
    case pool_event::unreachable:
      sh->connected.store(false, shard_relaxed);
      sh->unreachable.fetch_add(1, shard_relaxed);
      told = node_state::unreachable;
      break;
    case pool_event::reconnected:
      sh->connected.store(true, shard_relaxed);
      sh->reconnects.fetch_add(1, shard_relaxed);
      told = node_state::reconnected;
      break;
    case pool_event::script_loaded:
    case pool_event::function_loaded: return;  // the member's (member::note)
  }
  if (sh->was_master) node_changed(i, told, detail, address);
}

void telemetry::router(std::size_t i, const router_report& r) {
  if (closed_ || !nodes_[i].shards) return;
  router_cell& c = nodes_[i].router;
  switch (r.what) {
    case router_event::map_read: {
      c.map_reads.fetch_add(1, shard_relaxed);
      const std::vector<std::string>& masters = *r.masters;
      c.masters.store(masters.size(), shard_relaxed);
      node_cell& n = nodes_[i];
      const std::size_t count = n.shard_count.load(shard_relaxed);
      for (std::size_t k = 0; k < count; ++k) {
        const bool serves = std::find(masters.begin(), masters.end(), n.shards[k].address) != masters.end();
        n.shards[k].active.store(serves, shard_relaxed);
      }
      for (const std::string& m : masters) {
        shard_cell* sh = shard_of(i, m);
        if (sh == nullptr) continue;
        sh->active.store(true, shard_relaxed);
        sh->was_master = true;
        // Its pool connected before the map named it a master (a seed).
        if (sh->connected.load(shard_relaxed) && !sh->told_connected) {
          sh->told_connected = true;
          node_changed(i, node_state::connected, {}, m);
        }
      }
      return;
    }
    case router_event::map_read_failed: c.map_read_failures.fetch_add(1, shard_relaxed); return;
    case router_event::moved: c.moved.fetch_add(1, shard_relaxed); return;
    case router_event::ask: c.ask.fetch_add(1, shard_relaxed); return;
    case router_event::tryagain: c.tryagain.fetch_add(1, shard_relaxed); return;
    case router_event::clusterdown: c.clusterdown.fetch_add(1, shard_relaxed); return;
    case router_event::failover:
      c.failovers.fetch_add(1, shard_relaxed);
      node_changed(i, node_state::failover, r.detail, r.master);
      return;
  }
}

}  // namespace redsync::detail
