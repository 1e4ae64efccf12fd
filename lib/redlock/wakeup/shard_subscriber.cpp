// Sharded subscriptions on a cluster member's masters, following each
// channel's slot as it moves.

#include "redlock/wakeup/shard_subscriber.hpp"

#include "transport/slot_map.hpp"
#include "util/cluster_slot.hpp"

#include <string>
#include <utility>

namespace redsync::detail {

namespace {

constexpr std::chrono::microseconds map_timeout{2'000'000};
// How long a map that still names, as a slot's owner, the master that ended
// the slot's subscription is taken for stale: a cluster's nodes agree on a
// failover or a migration's end within about a second of gossip.
constexpr std::chrono::seconds left_master_is_stale_for{5};

std::string address_of(const std::string& host, int port) {
  return host + ":" + std::to_string(port);
}

}  // namespace

shard_subscriber::shard_subscriber(uv_loop_t* loop, cluster_router& router,
                                   std::chrono::milliseconds connect_timeout, events ev)
    : loop_(loop), router_(router), connect_timeout_(connect_timeout), ev_(std::move(ev)) {}

void shard_subscriber::subscribe(const std::string& channel) {
  if (subs_.count(channel) != 0) return;
  subs_[channel];
  place(channel);
}

void shard_subscriber::unsubscribe(const std::string& channel) {
  auto it = subs_.find(channel);
  if (it == subs_.end()) return;
  const std::string master = it->second.master;
  subs_.erase(it);  // a pending SSUBSCRIBE's answer now counts for nothing
  send_unsubscribe(master, channel);
}

void shard_subscriber::send_unsubscribe(const std::string& master, const std::string& channel) {
  auto l = links_.find(master);
  if (l == links_.end() || !l->second.conn) return;
  const auto st = l->second.conn->current_state();
  if (st != connection::state::connecting && st != connection::state::connected) return;
  // The SUNSUBSCRIBE's reply is a push (connection.hpp); the PING's answers.
  std::string wire;
  append_command(wire, {"SUNSUBSCRIBE", channel});
  append_command(wire, {"PING"});
  l->second.conn->send(std::make_shared<const std::string>(std::move(wire)), subscribe_timeout,
                       [](command_result&&) {});
}

const cluster_master* shard_subscriber::owner_of(const std::string& channel) const {
  const slot_map& map = router_.map();
  const std::int32_t owner = map.owner[key_slot(channel)];
  if (owner == slot_map::no_master) return nullptr;
  return &map.masters[static_cast<std::size_t>(owner)];
}

void shard_subscriber::place(const std::string& channel) {
  const auto it = subs_.find(channel);
  if (it == subs_.end() || it->second.pending || it->second.active) return;
  const cluster_master* m = owner_of(channel);
  if (!m) return refresh_then_place();  // no map yet, or nobody serves the slot
  // The master that just said the slot left it is still its owner in this
  // map: the map came from a node that has not heard of the failover or
  // migration yet (gossip takes a moment). Subscribing there would sit on a
  // demoted replica, or on a master that no longer hears the slot's
  // releases, until some lock command's MOVED refreshed the map: read it
  // again at the next tick instead. Bounded, so that a slot that really
  // returns to that master is followed there.
  if (!it->second.left.empty()) {
    if (std::chrono::steady_clock::now() < it->second.left_until &&
        address_of(m->host, m->port) == it->second.left) {
      map_stale_ = true;
      return;
    }
    it->second.left.clear();
  }
  send_subscribe(channel, m->host, m->port, 0);
}

shard_subscriber::link& shard_subscriber::link_at(const std::string& host, int port) {
  const std::string address = address_of(host, port);
  link& l = links_[address];
  if (!l.conn) {
    const auto ep = router_.master_endpoint(host, port);
    l.host = host;
    l.port = port;
    l.conn = std::make_unique<connection>(loop_, connection_config{ep.node, connect_timeout_, ep.tls},
                                          [](const std::string*) {});
    l.conn->set_push_handler([this, address](reply&& r) { on_push(address, std::move(r)); });
    l.conn->set_drop_listener([this, address](const std::string&) { on_drop(address); });
  }
  if (l.conn->current_state() == connection::state::disconnected) l.conn->connect();
  return l;
}

void shard_subscriber::send_subscribe(const std::string& channel, const std::string& host, int port,
                                      int redirects) {
  auto& s = subs_[channel];
  s.master = address_of(host, port);
  s.pending = true;
  s.active = false;
  s.attempt = ++attempts_;
  link_at(host, port)
      .conn->send(encode_command({"SSUBSCRIBE", channel}), subscribe_timeout,
                  [this, channel, attempt = s.attempt, master = s.master, redirects](command_result&& r) {
                    on_subscribe_reply(channel, attempt, master, redirects, std::move(r));
                  });
}

void shard_subscriber::on_subscribe_reply(const std::string& channel, std::uint64_t attempt,
                                          const std::string& master, int redirects, command_result&& r) {
  if (r.status == transport_status::shutdown) return;  // closing: `this` may be going
  const auto it = subs_.find(channel);
  if (it == subs_.end() || it->second.attempt != attempt) return;  // unwatched, or tried again since
  subscription& s = it->second;
  s.pending = false;
  if (r.status == transport_status::ok && !r.value.is_error()) {
    s.active = true;
    if (ev_.subscribed) ev_.subscribed(channel);
    return;
  }
  s.master.clear();
  // MOVED: the slot is elsewhere, which the map may not know yet. ASK is
  // left for later (Redis serves a migrating slot's sharded channels on the
  // source until the move ends, so it should not come): maintain() tries
  // again.
  const auto to = r.status == transport_status::ok ? parse_redirect(r.value.str) : std::nullopt;
  if (to && !to->ask && redirects < cluster_router::max_redirects) {
    refresh_then_place();
    const std::string host = to->host.empty() ? links_[master].host : to->host;
    send_subscribe(channel, host, to->port, redirects + 1);
  }
  // Any other failure (no answer, CLUSTERDOWN, NOPERM): maintain() tries
  // again, reading the map first when the master did not answer.
  if (r.status != transport_status::ok) map_stale_ = true;
}

void shard_subscriber::lost(const std::string& channel) {
  auto it = subs_.find(channel);
  if (it == subs_.end()) return;
  it->second.active = false;
  it->second.pending = false;
  it->second.master.clear();
  ++it->second.attempt;  // an answer still due from the old master counts for nothing
}

void shard_subscriber::on_push(const std::string& master, reply&& r) {
  if (r.elements.size() < 3) return;
  const std::string& kind = r.elements[0].str;
  const std::string& channel = r.elements[1].str;
  const auto it = subs_.find(channel);
  if (it == subs_.end() || it->second.master != master) return;
  if (kind == "smessage") {
    if (ev_.message) ev_.message(channel, r.elements[2].str);
  } else if (kind == "sunsubscribe" && it->second.active) {
    // The slot left this master (a failover or a migration), or this is the
    // reply to our SUNSUBSCRIBE of a channel watched again since: either
    // way, subscribe where the slot is now.
    lost(channel);
    it->second.left = master;
    it->second.left_until = std::chrono::steady_clock::now() + left_master_is_stale_for;
    refresh_then_place();
  }
}

void shard_subscriber::on_drop(const std::string& master) {
  // The master may be gone for good (a failover follows): subscriptions
  // there go wherever the map says once read again. Answers still due on
  // the dropped connection fail and count for nothing.
  for (auto& [channel, s] : subs_) {
    if (s.master == master) lost(channel);
  }
  refresh_then_place();
}

void shard_subscriber::refresh_then_place() {
  if (refreshing_) return;
  refreshing_ = true;
  router_.refresh(map_timeout, [this, alive = std::weak_ptr<int>(alive_)](const std::string&) {
    if (alive.expired()) return;
    refreshing_ = false;
    // On failure, the map is as it was: maintain() tries again.
    for (auto& [channel, s] : subs_) {
      (void)s;
      place(channel);
    }
  });
}

void shard_subscriber::maintain() {
  if (subs_.empty()) return;
  for (auto& [channel, s] : subs_) {
    if (s.pending) continue;
    const cluster_master* m = owner_of(channel);
    // The map moved on (it is read after every MOVED a lock command gets):
    // a subscription on another master may hear nothing any more.
    if (s.active && m && address_of(m->host, m->port) != s.master) {
      const std::string old = s.master;
      lost(channel);
      send_unsubscribe(old, channel);
    }
    if (!map_stale_) place(channel);
  }
  // A subscription failed without an answer (its master may be gone): the
  // map is read again, at most once a tick, and every channel placed then.
  if (map_stale_) {
    map_stale_ = false;
    refresh_then_place();
  }
}

std::vector<connection*> shard_subscriber::connections() {
  alive_.reset();
  subs_.clear();
  std::vector<connection*> out;
  for (auto& [address, l] : links_) out.push_back(l.conn.get());
  return out;
}

}  // namespace redsync::detail
