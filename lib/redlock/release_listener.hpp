#pragma once

// Wake-ups for waiters: one pub/sub connection per node, subscribed to the
// release channel of every lock name that has a waiter in this process.
// The release script publishes the next waiter in line; only that waiter
// tries again at once, so a hand-over costs about one attempt, not one per
// waiter. Notifications are an optimisation: a lost one (a node down, a
// subscription not yet active) only means the waiter's retry delay applies.
// Loop thread only.

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
  // `without[i]`: node i gets no subscription (a cluster member, whose
  // wake-ups are not built yet: docs/cluster.md); may be empty.
  release_listener(uv_loop_t* loop, std::vector<node_options> nodes,
                   std::vector<std::shared_ptr<const tls_context>> tls, const redsync_options& options,
                   std::vector<bool> without = {});
  ~release_listener();  // requires close() to have completed (or no watch ever)
  release_listener(const release_listener&) = delete;
  release_listener& operator=(const release_listener&) = delete;

  // Starts telling `w` about `channel`. Returns true if the channel's
  // subscription was already confirmed, so `w` gets no on_subscribed(): what
  // was published before this call (during its last attempt) was not
  // heard by it, and it should look again once, as on_subscribed() says.
  bool watch(const std::string& channel, waiter* w);
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
  void on_maintenance();

  uv_loop_t* loop_;
  std::vector<node_options> nodes_;
  std::vector<std::shared_ptr<const tls_context>> tls_;
  std::chrono::milliseconds connect_timeout_;
  std::vector<node_link> links_;
  std::vector<bool> without_;
  struct channel_watch {
    std::vector<waiter*> waiters;
    bool confirmed = false;  // a node confirmed the subscription
  };
  std::unordered_map<std::string, channel_watch> channels_;
  loop_timer* maintenance_ = nullptr;
  bool closing_ = false;
};

}  // namespace redsync::detail
