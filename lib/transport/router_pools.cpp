// A cluster router's pools: live by address, retired ones drained before
// they close (router_pools.hpp).

#include "transport/router_pools.hpp"

#include <stdexcept>
#include <utility>
#include <vector>

namespace redsync::detail {

node_pool* router_pools::live(const std::string& address) const {
  const auto it = live_.find(address);
  return it == live_.end() ? nullptr : it->second;
}

bool router_pools::is_live(const node_pool* pool) const {
  const auto it = all_.find(pool);
  return it != all_.end() && !it->second.retired;
}

node_pool& router_pools::add(std::unique_ptr<node_pool> pool) {
  node_pool* p = pool.get();
  if (!live_.emplace(p->address(), p).second)
    throw std::logic_error("router_pools: two live pools for one address");
  all_[p].pool = std::move(pool);
  return *p;
}

node_pool& router_pools::any() {
  if (all_.empty()) throw std::logic_error("cluster_router: send after close completed");
  const auto first = live_.begin();
  return first != live_.end() ? *first->second : *all_.begin()->second.pool;
}

void router_pools::send(node_pool& pool, std::uint64_t route, wire_command cmd,
                        std::chrono::microseconds timeout, command_callback done, std::uint32_t replies) {
  ++all_.at(&pool).in_flight;
  pool.send(
      route, std::move(cmd), timeout,
      [this, p = &pool, done = std::move(done)](command_result&& r) mutable {
        done(std::move(r));
        settle(p);
      },
      replies);
}

void router_pools::settle(const node_pool* pool) {
  entry& e = all_.at(pool);
  --e.in_flight;
  // Closed from the callback of its last command: nothing the router waits
  // for is outstanding on it any more (a late reply to a timed-out command
  // is only read and dropped).
  if (e.retired && e.in_flight == 0 && !e.closing) close_one(e);
}

std::size_t router_pools::retire_unless(const std::function<bool(const std::string&)>& keep) {
  if (closing_) return 0;
  std::vector<node_pool*> retired;
  for (auto it = live_.begin(); it != live_.end();) {
    if (keep(it->first)) {
      ++it;
      continue;
    }
    retired.push_back(it->second);
    it = live_.erase(it);
  }
  for (node_pool* p : retired) {
    entry& e = all_.at(p);
    e.retired = true;
    if (e.in_flight == 0) close_one(e);
  }
  return retired.size();
}

void router_pools::close_one(entry& e) {
  e.closing = true;
  const node_pool* key = e.pool.get();
  // node_pool::close never calls back inside itself.
  e.pool->close([this, key] {
    const auto it = all_.find(key);
    if (it != all_.end() && !it->second.retired) live_.erase(it->second.pool->address());
    all_.erase(key);  // destroys the pool inside its `closed`, which its contract allows
    if (closing_ && all_.empty()) {
      auto closed = std::move(closed_);
      closed_ = nullptr;
      if (closed) closed();  // may destroy us: touch nothing after
    }
  });
}

void router_pools::close(std::function<void()> closed) {
  closing_ = true;
  closed_ = std::move(closed);
  // Retiring pools already closing report to the same callback; the others
  // (live, and retired ones still draining) are closed now.
  for (auto& [key, e] : all_) {
    if (!e.closing) close_one(e);
  }
}

}  // namespace redsync::detail
