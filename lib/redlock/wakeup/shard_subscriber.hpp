#pragma once

// Wake-ups from one cluster member (docs/cluster.md, "Wake-ups"): a sharded
// subscription (SSUBSCRIBE) to each watched channel, on the master that
// serves the channel's slot, over one pub/sub connection per such master.
// The member's router knows the slot map; a subscription follows its slot
// when it moves:
//  * SSUBSCRIBE answered with MOVED: subscribe on the named master (the map
//    is read again in the background);
//  * a `sunsubscribe` the master sends unasked (the slot left it: failover,
//    migration), or its connection dropped: read the map again, subscribe
//    on the slot's master;
//  * every maintenance tick: a channel not subscribed (an error, a
//    timeout, a slot no master serves) is tried again, and a subscription
//    on another master than the map's owner of its slot is moved there.
// So a lost notification costs a waiter its retry delay at most, and a
// subscription is never lost for good. Loop thread only.

#include "transport/cluster_router.hpp"
#include "transport/connection.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

// How long a (S)SUBSCRIBE or (S)UNSUBSCRIBE may take before the connection
// counts as broken (release_listener and shard_subscriber alike).
inline constexpr std::chrono::microseconds subscribe_timeout{2'000'000};

class shard_subscriber {
 public:
  struct events {
    // `channel` is subscribed (again, after a move): what was published
    // before was not heard.
    std::function<void(const std::string& channel)> subscribed;
    // A message on `channel`.
    std::function<void(const std::string& channel, std::string_view payload)> message;
  };

  shard_subscriber(uv_loop_t* loop, cluster_router& router, std::chrono::milliseconds connect_timeout,
                   events ev);
  shard_subscriber(const shard_subscriber&) = delete;
  shard_subscriber& operator=(const shard_subscriber&) = delete;

  void subscribe(const std::string& channel);
  void unsubscribe(const std::string& channel);
  // Reconnects, retries and moves subscriptions (see above); called
  // periodically while anybody waits.
  void maintain();
  // The connections, for closing (close_all); nothing may be called after.
  std::vector<connection*> connections();

 private:
  struct subscription {
    std::string master;  // host:port where it is (being) made; empty = nowhere
    bool pending = false;
    bool active = false;
    std::uint64_t attempt = 0;  // which SSUBSCRIBE's answer counts
    // The master that last ended this subscription unasked (the slot left
    // it), and until when a map naming it still as the slot's owner is
    // taken for stale (see place()).
    std::string left;
    std::chrono::steady_clock::time_point left_until{};
  };
  struct link {
    std::string host;
    int port = 0;
    std::unique_ptr<connection> conn;
  };

  // Subscribes on the master the map names for the channel's slot, or reads
  // the map first when none does.
  void place(const std::string& channel);
  // SUNSUBSCRIBE on `master`'s connection, if it is up.
  void send_unsubscribe(const std::string& master, const std::string& channel);
  void send_subscribe(const std::string& channel, const std::string& host, int port, int redirects);
  void on_subscribe_reply(const std::string& channel, std::uint64_t attempt, const std::string& master,
                          int redirects, command_result&& r);
  // The subscription is gone from its master: find the slot's owner anew.
  void lost(const std::string& channel);
  void on_push(const std::string& master, reply&& r);
  void on_drop(const std::string& master);
  void refresh_then_place();
  link& link_at(const std::string& host, int port);
  // The map's master for `channel`'s slot, or nullptr.
  const cluster_master* owner_of(const std::string& channel) const;

  uv_loop_t* loop_;
  cluster_router& router_;
  std::chrono::milliseconds connect_timeout_;
  events ev_;
  std::map<std::string, subscription> subs_;  // by channel
  std::map<std::string, link> links_;         // by master host:port
  std::uint64_t attempts_ = 0;
  bool refreshing_ = false;
  bool map_stale_ = false;  // a master did not answer: read the map before placing again
  // Expires with this object: a map read answers after close.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace redsync::detail
