// A member of the set: a node_pool or a cluster_router behind one send().

#include "transport/member.hpp"

#include <utility>

namespace redsync::detail {

member::member(std::unique_ptr<node_pool> pool) : pool_(std::move(pool)) {}

member::member(std::unique_ptr<cluster_router> router) : router_(std::move(router)) {}

member::~member() = default;

void member::send(std::uint16_t slot, std::uint64_t route, wire_command cmd,
                  std::chrono::microseconds timeout, command_callback done, std::uint32_t replies) {
  if (router_) return router_->send(slot, route, std::move(cmd), timeout, std::move(done), replies);
  pool_->send(route, std::move(cmd), timeout, std::move(done), replies);
}

void member::note(pool_event e, std::string_view detail,
                  std::chrono::steady_clock::time_point sent_at) const {
  if (pool_) return pool_->note(e, detail, sent_at);
  if (cluster_listener_) cluster_listener_(e, detail, sent_at);
}

void member::close(std::function<void()> closed) {
  if (router_) return router_->close(std::move(closed));
  pool_->close(std::move(closed));
}

}  // namespace redsync::detail
