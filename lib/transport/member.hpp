#pragma once

// One member of the Redlock set: a standalone node (one node_pool) or a
// whole Redis Cluster (a cluster_router). The layers above send every call
// through a member_slot: the member and the slot of the call's keys, which a
// standalone member ignores (docs/cluster.md, "Engine integration").
// Loop thread only (except construction).

#include "transport/cluster_router.hpp"
#include "transport/node_pool.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

namespace redsync::detail {

class member {
 public:
  explicit member(std::unique_ptr<node_pool> pool);
  explicit member(std::unique_ptr<cluster_router> router);
  ~member();
  member(const member&) = delete;
  member& operator=(const member&) = delete;

  bool is_cluster() const noexcept { return router_ != nullptr; }
  // The standalone node's pool, or nullptr on a cluster member.
  node_pool* pool() noexcept { return pool_.get(); }
  // The cluster's router, or nullptr on a standalone member.
  cluster_router* router() noexcept { return router_.get(); }

  // node_pool::send's contract; `slot` picks the master on a cluster member.
  void send(std::uint16_t slot, std::uint64_t route, wire_command cmd, std::chrono::microseconds timeout,
            command_callback done, std::uint32_t replies = 1);
  // Reports a script event (node_pool::note) to the member's event listener.
  void note(pool_event e, std::string_view detail, std::chrono::steady_clock::time_point sent_at) const;
  // Where note() reports on a cluster member (a standalone member's pool has
  // its own listener, node_pool::on_event).
  void on_cluster_event(pool_listener listener) { cluster_listener_ = std::move(listener); }

  void close(std::function<void()> closed);

 private:
  std::unique_ptr<node_pool> pool_;
  std::unique_ptr<cluster_router> router_;
  pool_listener cluster_listener_;
};

// Where one call goes: a member, and the slot of every key of the call.
struct member_slot {
  member* m = nullptr;
  std::uint16_t slot = 0;

  bool is_cluster() const noexcept { return m->is_cluster(); }
  void send(std::uint64_t route, wire_command cmd, std::chrono::microseconds timeout, command_callback done,
            std::uint32_t replies = 1) const {
    m->send(slot, route, std::move(cmd), timeout, std::move(done), replies);
  }
  void note(pool_event e, std::string_view detail, std::chrono::steady_clock::time_point sent_at) const {
    m->note(e, detail, sent_at);
  }
};

}  // namespace redsync::detail
