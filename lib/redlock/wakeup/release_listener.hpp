#pragma once

// Wake-ups for waiters: one pub/sub connection per standalone node,
// subscribed to the release channel of every lock name that has a waiter in
// this process; on a cluster member, sharded subscriptions on the masters
// that serve those channels' slots (shard_subscriber.hpp).
// The release script publishes the next waiter in line; only that waiter
// tries again at once, so a hand-over costs about one attempt, not one per
// waiter. Notifications are an optimisation: a lost one (a node down, a
// subscription not yet active) only means the waiter's retry delay applies.
// Loop thread only.

#include "redlock/wakeup/shard_subscriber.hpp"
#include "transport/cluster_router.hpp"
#include "transport/connection.hpp"
#include "transport/loop_timer.hpp"

#include <redsync/options.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace redsync::detail {

class release_listener {
 public:
  struct waiter {
    virtual ~waiter() = default;
    // Node `node` reserved a name for the waiter whose value is
    // `next_in_line`.
    virtual void on_release(std::size_t node, std::string_view next_in_line) = 0;
    // A node confirmed the subscription. A release between the waiter's
    // last attempt and this moment was not heard: the head of the line
    // should look again.
    virtual void on_subscribed() = 0;
  };

  // `tls[i]` is node i's TLS context (null for plain TCP), shared with its
  // node_pool.
  // `routers[i]`, when set, is cluster member i's router (nodes[i] and
  // tls[i] unused then): its wake-ups come from sharded subscriptions on
  // the masters of its slot map (docs/cluster.md). May be empty.
  release_listener(uv_loop_t* loop, std::vector<node_options> nodes,
                   std::vector<std::shared_ptr<const tls_context>> tls, const redsync_options& options,
                   std::vector<cluster_router*> routers = {});
  ~release_listener();  // requires close() to have completed (or no watch ever)
  release_listener(const release_listener&) = delete;
  release_listener& operator=(const release_listener&) = delete;

  // Starts telling `w` about `channel` (a standalone node's name for it;
  // `cluster_channel` is the cluster members' name, lock_keys::channels,
  // empty when the set has none). Returns true if the channel's
  // subscription was already confirmed, so `w` gets no on_subscribed(): what
  // was published before this call (during its last attempt) was not
  // heard by it, and it should look again once, as on_subscribed() says.
  bool watch(const std::string& channel, waiter* w, const std::string& cluster_channel = {});
  void unwatch(const std::string& channel, waiter* w);

  // Closes every connection and timer, then calls `closed`.
  void close(std::function<void()> closed);

 private:
  struct node_link {
    std::unique_ptr<connection> conn;
  };

  void ensure_connected(std::size_t i);
  void subscribe_all(std::size_t i);
  void subscribe(std::size_t i, const std::string& channel);
  void send_to_all(std::string_view verb, const std::string& channel);
  void on_confirmed(const std::string& channel);
  void on_push(std::size_t node, reply&& r);
  // Tells the waiters of `channel` that node `node` published `payload`.
  void deliver(std::size_t node, const std::string& channel, std::string_view payload);
  // The standalone name of a cluster member's channel, or nullptr.
  const std::string* plain_channel(const std::string& cluster_channel) const;
  void on_maintenance();

  uv_loop_t* loop_;
  std::vector<node_options> nodes_;
  std::vector<std::shared_ptr<const tls_context>> tls_;
  std::chrono::milliseconds connect_timeout_;
  std::vector<node_link> links_;
  std::vector<std::unique_ptr<shard_subscriber>> shards_;  // per cluster member, else null
  struct channel_watch {
    std::vector<waiter*> waiters;
    bool confirmed = false;  // a node confirmed the subscription
    std::string cluster_channel;
  };
  std::unordered_map<std::string, channel_watch> channels_;
  std::unordered_map<std::string, std::string> by_cluster_channel_;  // -> channels_' key
  loop_timer* maintenance_ = nullptr;
  bool closing_ = false;
};

}  // namespace redsync::detail
