#pragma once

// The node pools of a cluster_router and their lifetime
// (cluster_router.hpp, "Pool lifetime"): the live pool of each address, and
// the retired ones that still have commands in flight. Every command the
// router sends to a pool goes through send() here, which counts it in
// flight until its callback returned: a retired pool is closed once that
// count is zero, so its close() (which fails what is outstanding with
// `shutdown`) never fails a command the router is still waiting for.
// Loop thread only.

#include "transport/node_pool.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace redsync::detail {

class router_pools {
 public:
  router_pools() = default;
  ~router_pools() = default;  // requires close() to have completed (node_pool's rule)
  router_pools(const router_pools&) = delete;
  router_pools& operator=(const router_pools&) = delete;

  // The live pool of `address` (host:port), or null.
  node_pool* live(const std::string& address) const;
  // Whether `pool` is live (not retired): its events are the member's.
  bool is_live(const node_pool* pool) const;
  // Takes a new pool as the live one of its address (none is live there).
  node_pool& add(std::unique_ptr<node_pool> pool);
  // Some pool not closed yet (live or retiring): where the router sends
  // what it fails itself while closing. There is one until close()
  // completed (the seeds' pools are never retired).
  node_pool& any();

  // node_pool::send on `pool` (one of ours, live or retiring), counted in
  // flight until `done` returned.
  void send(node_pool& pool, std::uint64_t route, wire_command cmd, std::chrono::microseconds timeout,
            command_callback done, std::uint32_t replies = 1);

  // Retires every live pool whose address `keep` rejects: no longer live
  // (the next pool_at for its address makes a fresh one), closed as soon as
  // nothing is in flight on it. Returns how many were retired.
  std::size_t retire_unless(const std::function<bool(const std::string& address)>& keep);

  std::size_t live_count() const noexcept { return live_.size(); }
  // Retired pools whose close has not completed.
  std::size_t retiring_count() const noexcept { return all_.size() - live_.size(); }

  // Closes every pool, retiring ones too (their commands still in flight
  // fail with `shutdown`), then calls `closed`, after the last pool closed.
  void close(std::function<void()> closed);

 private:
  struct entry {
    std::unique_ptr<node_pool> pool;
    std::size_t in_flight = 0;
    bool retired = false;
    bool closing = false;
  };
  void settle(const node_pool* pool);
  void close_one(entry& e);

  std::map<std::string, node_pool*> live_;  // by host:port
  std::map<const node_pool*, entry> all_;   // live and retiring, until closed
  bool closing_ = false;
  std::function<void()> closed_;
};

}  // namespace redsync::detail
