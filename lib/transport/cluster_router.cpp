// A cluster member's slot map, its pools, and the redirections of each
// command (cluster_router.hpp).

#include "transport/cluster_router.hpp"

#include "transport/loop_timer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace redsync::detail {
namespace {

// How long a map read that no command waits for may take.
constexpr std::chrono::microseconds background_refresh_timeout = std::chrono::seconds(1);
constexpr std::chrono::microseconds identity_read_timeout = std::chrono::seconds(1);
// While commands flow, the map is read again at least this often.
constexpr std::chrono::seconds map_max_age{5};

bool unknown_subcommand(const reply& r) {
  return r.is_error() && (r.str.find("nknown subcommand") != std::string::npos ||
                          r.str.find("unknown command") != std::string::npos);
}

std::string describe(const command_result& r) {
  switch (r.status) {
    case transport_status::ok: return r.value.is_error() ? r.value.str : std::string("unexpected reply");
    case transport_status::timeout: return "timeout";
    case transport_status::unreachable: return r.error.empty() ? std::string("unreachable") : r.error;
    case transport_status::shutdown: return "shutdown";
  }
  return "?";
}

}  // namespace

struct cluster_router::pending {
  std::uint16_t slot = 0;
  std::uint64_t route = 0;
  wire_command cmd;
  std::uint32_t replies = 1;
  clock::time_point deadline;
  command_callback done;
  int redirects = 0;
  bool map_read_for_owner = false;  // the map was read again because the slot had no master
  // While it waits for a map read: fires at the deadline, so a read that
  // takes longer (one started by another command, with its own bound)
  // cannot hold this command past its timeout.
  loop_timer* deadline_timer = nullptr;
  bool finished = false;

  void finish(command_result&& r) {
    if (finished) return;
    finished = true;
    stop_timer();
    done(std::move(r));
  }
  void stop_timer() {
    if (deadline_timer != nullptr) deadline_timer->close();
    deadline_timer = nullptr;
  }
};

cluster_router::cluster_router(uv_loop_s* loop, std::vector<node_options> seeds,
                               const redsync_options& options)
    : loop_(loop), seeds_(std::move(seeds)), options_(options) {
  if (seeds_.empty()) throw std::invalid_argument("cluster_router: no seed");
  address_ = "cluster ";
  for (std::size_t i = 0; i < seeds_.size(); ++i) {
    address_ += (i == 0 ? "" : ",") + seeds_[i].address();
    // Made here, so a bad TLS file is reported by the constructor, and
    // there is always a pool to fail sends made while closing.
    pool_at(seeds_[i].host, seeds_[i].port);
  }
}

cluster_router::~cluster_router() = default;

node_pool& cluster_router::pool_at(const std::string& host, int port) {
  node_options node = seeds_.front();
  node.host = host;
  node.port = port;
  const std::string address = node.address();
  if (node_pool* live = pools_.live(address)) return *live;
  // A fresh pool, also for an address whose old pool was retired: the
  // listeners are the router's, so it reports as the old one did.
  auto pool = std::make_unique<node_pool>(loop_, std::move(node), options_);
  const node_pool* self = pool.get();
  pool->on_server_info([this, address](const reply& info) {
    if (info_listener_) info_listener_(address, info);
  });
  pool->on_event([this, address, self](pool_event e, std::string_view detail, clock::time_point) {
    if (master_listener_ && !closing_ && pools_.is_live(self)) master_listener_(address, e, detail);
  });
  return pools_.add(std::move(pool));
}

void cluster_router::send(std::uint16_t slot, std::uint64_t route, wire_command cmd,
                          std::chrono::microseconds timeout, command_callback done, std::uint32_t replies) {
  auto p = std::make_shared<pending>();
  p->slot = slot;
  p->route = route;
  p->cmd = std::move(cmd);
  p->replies = replies;
  p->deadline = clock::now() + timeout;
  p->done = std::move(done);
  if (closing_ || timeout.count() <= 0) {
    // The pools fail it (`shutdown`, or `timeout` before it is written) on
    // a later iteration, never inside send().
    pools_.send(pools_.any(), route, p->cmd, timeout, std::move(p->done), replies);
    return;
  }
  dispatch(std::move(p));
}

void cluster_router::dispatch(std::shared_ptr<pending> p) {
  if (closing_) {
    command_result r;
    r.status = transport_status::shutdown;
    r.error = "cluster closed";
    p->finish(std::move(r));
    return;
  }
  const auto now = clock::now();
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(p->deadline - now);
  // The failover check counts the replicas the map lists: a replica added
  // or back since the last read is counted from the next one.
  if (have_map_ && now - map_read_at_ > map_max_age) refresh_in_background();
  if (have_map_ && map_.owner[p->slot] != slot_map::no_master) {
    const cluster_master& m = map_.masters[static_cast<std::size_t>(map_.owner[p->slot])];
    send_to(std::move(p), pool_at(m.host, m.port), false);
    return;
  }
  // Only ever reached from send() on the first try (the callback then runs
  // after the read, never synchronously) or from a read's callback.
  if (left.count() > 0 && (!have_map_ || !p->map_read_for_owner)) {
    p->map_read_for_owner = have_map_;
    if (p->deadline_timer == nullptr) {
      p->deadline_timer = loop_timer::create(loop_);
      p->deadline_timer->start(left, [p] {
        p->deadline_timer->close();
        p->deadline_timer = nullptr;
        command_result r;
        r.status = transport_status::timeout;
        p->finish(std::move(r));
      });
    }
    refresh(left, [this, p](const std::string& error) {
      if (p->finished) return;
      if (!error.empty() && !have_map_) {
        command_result r;
        r.status = transport_status::unreachable;
        r.error = "cluster: no slot map: " + error;
        p->finish(std::move(r));
        return;
      }
      if (!have_map_) p->map_read_for_owner = true;
      dispatch(p);
    });
    return;
  }
  command_result r;
  if (left.count() <= 0) {
    r.status = transport_status::timeout;
  } else {
    r.value.type = reply::kind::error;
    r.value.str = fmt::format("CLUSTERDOWN redsync: no master serves slot {} ({} of {} slots are served)",
                              p->slot, 16384 - map_.uncovered(), 16384);
    if (report_listener_) report_listener_({.what = router_event::clusterdown});
  }
  p->finish(std::move(r));
}

void cluster_router::send_to(std::shared_ptr<pending> p, node_pool& pool, bool asking) {
  p->stop_timer();
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(p->deadline - clock::now());
  wire_command cmd = p->cmd;
  std::uint32_t replies = p->replies;
  if (asking) {
    auto both = std::make_shared<std::string>();
    append_command(*both, {"ASKING"});
    *both += *p->cmd;
    cmd = std::move(both);
    ++replies;
  }
  node_pool* target = &pool;
  pools_.send(
      pool, p->route, std::move(cmd), left,
      [this, p, target](command_result&& r) { on_reply(p, *target, std::move(r)); }, replies);
}

void cluster_router::read_identity(const std::string& address) {
  if (!info_listener_ || closing_) return;
  node_pool* pool = pools_.live(address);
  if (pool == nullptr) return;
  // One read in flight per master, and at most one a second: a master
  // whose identity can never match (say, its eviction policy makes it
  // refuse every vote) must not cost an INFO per call.
  const auto now = clock::now();
  auto [it, fresh] = identity_reads_.try_emplace(address, clock::time_point{});
  if (!fresh && now - it->second < std::chrono::seconds(1)) return;
  it->second = now;
  // Only the sections identify_server reads (node_identity.cpp): run_id,
  // role, the replication id, the eviction policy, the last load's key
  // counts. Several sections in one INFO need Redis 7.0, as cluster
  // members do anyway (SPUBLISH, SSUBSCRIBE).
  static const wire_command info = encode_command({"INFO", "server", "replication", "memory", "persistence"});
  pools_.send(*pool, 0, info, identity_read_timeout, [this, address](command_result&& r) {
    if (r.status == transport_status::ok && !closing_ && info_listener_) info_listener_(address, r.value);
  });
}

void cluster_router::on_reply(std::shared_ptr<pending> p, node_pool& pool, command_result&& r) {
  if (r.status == transport_status::ok && r.value.is_error() && !closing_) {
    if (const std::optional<redirect> to = parse_redirect(r.value.str);
        to && p->redirects < max_redirects && clock::now() < p->deadline) {
      ++p->redirects;
      std::string host = to->host;
      if (host.empty()) {
        // "MOVED 2 :7000": the host of the node that answered ("[::1]:7000"
        // has its brackets only in the address).
        host = pool.address().substr(0, pool.address().rfind(':'));
        if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
      }
      if (report_listener_) {
        const std::string to_address = node_options{.host = host, .port = to->port}.address();
        report_listener_({.what = to->ask ? router_event::ask : router_event::moved, .master = to_address});
      }
      if (!to->ask) {
        // The new owner takes the slot now, before any later command is
        // sent, so commands of one route keep their order.
        map_.owner[to->slot] = static_cast<std::int32_t>(map_.master_at(host, to->port));
        refresh_in_background();
      }
      send_to(std::move(p), pool_at(host, to->port), to->ask);
      return;
    }
  }
  if (r.status == transport_status::timeout || r.status == transport_status::unreachable) {
    suspects_.insert(pool.address());
    refresh_in_background();
  } else if (r.status == transport_status::ok) {
    suspects_.erase(pool.address());
  }
  r.served_by = pool.address();
  if (report_listener_ && r.status == transport_status::ok && r.value.is_error()) {
    if (r.value.str.starts_with("TRYAGAIN"))
      report_listener_({.what = router_event::tryagain, .master = r.served_by});
    else if (r.value.str.starts_with("CLUSTERDOWN"))
      report_listener_({.what = router_event::clusterdown, .master = r.served_by});
  }
  p->finish(std::move(r));
}

void cluster_router::refresh(std::chrono::microseconds timeout,
                             std::function<void(const std::string&)> done) {
  refresh_waiters_.push_back(std::move(done));
  if (refreshing_) return;
  refreshing_ = true;
  // The known masters, then the seeds, each once; a node that did not
  // answer last time goes last: a paused master still takes connections
  // and answers nothing, and asked first it would take the whole read's
  // time, every time, so the promoted replica would never be found.
  sources_.clear();
  std::vector<std::pair<std::string, int>> silent;
  const auto add = [&](const std::string& host, int port) {
    const std::pair<std::string, int> node{host, port};
    if (std::find(sources_.begin(), sources_.end(), node) != sources_.end() ||
        std::find(silent.begin(), silent.end(), node) != silent.end())
      return;
    // The address only: a pool is made when a node is asked.
    (suspects_.contains(node_options{.host = host, .port = port}.address()) ? silent : sources_)
        .push_back(node);
  };
  for (const cluster_master& m : map_.masters) add(m.host, m.port);
  for (const node_options& s : seeds_) add(s.host, s.port);
  sources_.insert(sources_.end(), silent.begin(), silent.end());
  read_map_from(0, clock::now() + timeout, {});
}

void cluster_router::refresh_in_background() {
  if (refreshing_ || closing_) return;
  refresh(background_refresh_timeout, [](const std::string&) {});
}

void cluster_router::read_map_from(std::size_t source, clock::time_point deadline,
                                   std::vector<std::string> errors) {
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - clock::now());
  // The first source is always asked (its pool bounds the command and
  // answers on a later iteration), so refresh() never calls back inside
  // itself, even with no time left.
  if (source >= sources_.size() || (source > 0 && left.count() <= 0) || closing_) {
    std::string why = closing_ ? "closing" : errors.empty() ? "timeout" : "";
    for (std::size_t i = 0; i < errors.size(); ++i) why += (i == 0 ? "" : "; ") + errors[i];
    finish_refresh(why);
    return;
  }
  const auto [host, port] = sources_[source];
  node_pool& pool = pool_at(host, port);
  // CLUSTER SHARDS, and CLUSTER SLOTS where SHARDS is unknown (before 7.0).
  auto ask = std::make_shared<std::function<void(bool)>>();
  *ask = [this, source, deadline, errors, host = host, &pool, ask](bool shards) mutable {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - clock::now());
    const wire_command cmd = encode_command({"CLUSTER", shards ? "SHARDS" : "SLOTS"});
    pools_.send(pool, 0, cmd, std::max(left, std::chrono::microseconds(1)),
                [this, source, deadline, errors, host, shards, &pool, ask](command_result&& r) mutable {
                  if (closing_) {
                    finish_refresh("closing");
                  } else if (r.status == transport_status::ok && shards && unknown_subcommand(r.value)) {
                    (*ask)(false);
                    return;
                  } else {
                    std::string error;
                    std::optional<slot_map> m;
                    if (r.status == transport_status::ok) {
                      suspects_.erase(pool.address());
                      const bool tls = seeds_.front().tls.enabled;
                      m = shards ? parse_cluster_shards(r.value, host, tls, error)
                                 : parse_cluster_slots(r.value, host, error);
                    } else {
                      suspects_.insert(pool.address());
                      error = describe(r);
                    }
                    if (m) {
                      adopt_map(std::move(*m));
                      finish_refresh("");
                    } else {
                      errors.push_back(pool.address() + ": " + error);
                      read_map_from(source + 1, deadline, std::move(errors));
                    }
                  }
                  *ask = nullptr;  // breaks the cycle through the capture of `ask`
                });
  };
  (*ask)(true);
}

void cluster_router::adopt_map(slot_map&& m) {
  const auto failovers = changes_.adopt(m);
  map_ = std::move(m);
  have_map_ = true;
  map_read_at_ = clock::now();
  // Pool lifetime (cluster_router.hpp): the masters that serve slots and
  // the seeds keep their pools; the others drain and close.
  const std::vector<std::string>& serving = changes_.masters();
  pools_.retire_unless([&](const std::string& address) {
    return std::find(serving.begin(), serving.end(), address) != serving.end() ||
           std::any_of(seeds_.begin(), seeds_.end(),
                       [&](const node_options& s) { return s.address() == address; });
  });
  std::erase_if(suspects_, [&](const std::string& address) { return pools_.live(address) == nullptr; });
  if (!report_listener_) return;
  report_listener_({.what = router_event::map_read, .masters = &changes_.masters()});
  for (const auto& [old_master, new_master] : failovers)
    report_listener_({.what = router_event::failover, .master = new_master, .detail = old_master});
}

void cluster_router::finish_refresh(const std::string& error) {
  if (report_listener_ && !error.empty() && !closing_)
    report_listener_({.what = router_event::map_read_failed, .detail = error});
  refreshing_ = false;
  auto waiters = std::move(refresh_waiters_);
  refresh_waiters_.clear();
  for (auto& w : waiters) w(error);
}

void cluster_router::close(std::function<void()> closed) {
  closing_ = true;
  pools_.close(std::move(closed));
}

}  // namespace redsync::detail
