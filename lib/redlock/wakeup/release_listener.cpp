// Wake-ups: one pub/sub connection per standalone node, sharded
// subscriptions on cluster members, announcing the next waiter in line when
// a lock is released.

#include "redlock/wakeup/release_listener.hpp"

#include <algorithm>

namespace redsync::detail {

namespace {

// How often a dropped subscriber connection is re-established (and its
// subscriptions renewed) while anybody waits.
constexpr std::chrono::milliseconds maintenance_interval{500};

}  // namespace

release_listener::release_listener(uv_loop_t* loop, std::vector<node_options> nodes,
                                   std::vector<std::shared_ptr<const tls_context>> tls,
                                   const redsync_options& options, std::vector<cluster_router*> routers)
    : loop_(loop), nodes_(std::move(nodes)), tls_(std::move(tls)), connect_timeout_(options.connect_timeout) {
  links_.resize(nodes_.size());
  shards_.resize(nodes_.size());
  for (std::size_t i = 0; i < routers.size() && i < nodes_.size(); ++i) {
    if (!routers[i]) continue;
    shard_subscriber::events ev;
    ev.subscribed = [this](const std::string& cluster_channel) {
      if (const std::string* channel = plain_channel(cluster_channel)) on_confirmed(*channel);
    };
    ev.message = [this, i](const std::string& cluster_channel, std::string_view payload) {
      if (const std::string* channel = plain_channel(cluster_channel)) deliver(i, *channel, payload);
    };
    shards_[i] = std::make_unique<shard_subscriber>(loop_, *routers[i], connect_timeout_, std::move(ev));
  }
}

release_listener::~release_listener() = default;

bool release_listener::watch(const std::string& channel, waiter* w, const std::string& cluster_channel) {
  if (closing_) return false;
  auto& watch = channels_[channel];
  watch.waiters.push_back(w);
  if (watch.waiters.size() > 1) return watch.confirmed;
  watch.cluster_channel = cluster_channel;
  if (!cluster_channel.empty()) by_cluster_channel_[cluster_channel] = channel;
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const bool fresh =
        links_[i].conn == nullptr || links_[i].conn->current_state() == connection::state::disconnected;
    if (shards_[i]) {
      if (!cluster_channel.empty()) shards_[i]->subscribe(cluster_channel);
      continue;
    }
    ensure_connected(i);  // a fresh connection subscribes to everything, this channel included
    if (!fresh) subscribe(i, channel);
  }
  if (!maintenance_) {
    maintenance_ = loop_timer::create(loop_);
    maintenance_->start(maintenance_interval, [this] { on_maintenance(); });
  }
  return false;
}

void release_listener::unwatch(const std::string& channel, waiter* w) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  auto& ws = it->second.waiters;
  ws.erase(std::remove(ws.begin(), ws.end(), w), ws.end());
  if (!ws.empty()) return;
  const std::string cluster_channel = std::move(it->second.cluster_channel);
  channels_.erase(it);
  if (closing_) return;
  send_to_all("UNSUBSCRIBE", channel);
  if (cluster_channel.empty()) return;
  by_cluster_channel_.erase(cluster_channel);
  for (auto& shard : shards_) {
    if (shard) shard->unsubscribe(cluster_channel);
  }
}

const std::string* release_listener::plain_channel(const std::string& cluster_channel) const {
  if (closing_) return nullptr;
  const auto it = by_cluster_channel_.find(cluster_channel);
  return it == by_cluster_channel_.end() ? nullptr : &it->second;
}

void release_listener::ensure_connected(std::size_t i) {
  if (shards_[i]) return shards_[i]->maintain();
  auto& link = links_[i];
  if (!link.conn) {
    link.conn = std::make_unique<connection>(loop_, connection_config{nodes_[i], connect_timeout_, tls_[i]},
                                             [](const std::string*) {});
    link.conn->set_push_handler([this, i](reply&& r) { on_push(i, std::move(r)); });
  }
  if (link.conn->current_state() == connection::state::disconnected) {
    link.conn->connect();
    // A new connection has no subscriptions: renew them all (queued until
    // the connection is up).
    subscribe_all(i);
  }
}

void release_listener::subscribe_all(std::size_t i) {
  for (const auto& [channel, watch] : channels_) {
    (void)watch;
    subscribe(i, channel);
  }
}

void release_listener::subscribe(std::size_t i, const std::string& channel) {
  links_[i].conn->send(encode_command({"SUBSCRIBE", channel}), subscribe_timeout,
                       [this, channel](command_result&& r) {
                         if (r.status == transport_status::ok && !r.value.is_error()) on_confirmed(channel);
                       });
}

void release_listener::on_confirmed(const std::string& channel) {
  if (closing_) return;
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  it->second.confirmed = true;
  const std::vector<waiter*> ws = it->second.waiters;
  for (waiter* w : ws) {
    auto still = channels_.find(channel);
    if (still == channels_.end()) break;
    const auto& now = still->second.waiters;
    if (std::find(now.begin(), now.end(), w) != now.end()) w->on_subscribed();
  }
}

void release_listener::send_to_all(std::string_view verb, const std::string& channel) {
  auto cmd = encode_command({verb, channel});
  for (auto& link : links_) {
    if (!link.conn) continue;
    const auto st = link.conn->current_state();
    if (st != connection::state::connecting && st != connection::state::connected) continue;
    link.conn->send(cmd, subscribe_timeout, [](command_result&&) {});
  }
}

void release_listener::on_push(std::size_t node, reply&& r) {
  // ["message", channel, payload]
  if (r.elements.size() < 3 || r.elements[0].str != "message") return;
  deliver(node, r.elements[1].str, r.elements[2].str);
}

void release_listener::deliver(std::size_t node, const std::string& channel_ref, std::string_view payload) {
  // A waiter may stop watching from inside its callback (and so free the
  // strings passed here): iterate copies.
  const std::string channel = channel_ref;
  const std::string head(payload);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  const std::vector<waiter*> ws = it->second.waiters;
  for (waiter* w : ws) {
    auto still = channels_.find(channel);
    if (still == channels_.end()) break;
    const auto& now = still->second.waiters;
    if (std::find(now.begin(), now.end(), w) == now.end()) continue;
    w->on_release(node, head);
  }
}

void release_listener::on_maintenance() {
  if (closing_) return;
  if (channels_.empty()) {
    maintenance_->close();
    maintenance_ = nullptr;
    return;
  }
  for (std::size_t i = 0; i < links_.size(); ++i) ensure_connected(i);
  maintenance_->start(maintenance_interval, [this] { on_maintenance(); });
}

void release_listener::close(std::function<void()> closed) {
  closing_ = true;
  channels_.clear();
  if (maintenance_) {
    maintenance_->close();
    maintenance_ = nullptr;
  }
  std::vector<connection*> conns;
  for (auto& link : links_) conns.push_back(link.conn.get());
  for (auto& shard : shards_) {
    if (!shard) continue;
    const auto more = shard->connections();
    conns.insert(conns.end(), more.begin(), more.end());
  }
  close_all(conns, std::move(closed));
}

}  // namespace redsync::detail
