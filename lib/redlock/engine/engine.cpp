// The engine: the loop, the node pools, node trust and the wake-up listener
// of one Redsync, and its orderly shutdown.

#include "redlock/engine/engine.hpp"

#include "redlock/options_check.hpp"

#include <redsync/error.hpp>

#include <uv.h>

#include <fmt/format.h>

#include <future>

namespace redsync::detail {

namespace {

std::vector<member_spec> standalone(std::vector<node_options> nodes) {
  std::vector<member_spec> out;
  out.reserve(nodes.size());
  for (auto& n : nodes) out.push_back({std::move(n), {}});
  return out;
}

// "redis+cluster://a:1,b:2": how messages name a cluster member.
std::string cluster_uri_text(const std::vector<node_options>& seeds) {
  std::string out = seeds.front().tls.enabled ? "rediss+cluster://" : "redis+cluster://";
  for (std::size_t k = 0; k < seeds.size(); ++k) out += (k == 0 ? "" : ",") + seeds[k].address();
  return out;
}

}  // namespace

engine::engine(std::vector<node_options> nodes, const redsync_options& options)
    : engine(standalone(std::move(nodes)), options) {}

engine::engine(std::vector<member_spec> members, const redsync_options& options)
    : loop_(options.loop, options.callers_run_loop),
      shutdown_timeout_(options.shutdown_timeout),
      rng_(std::random_device{}()),
      restart_guard_(options.restart_guard),
      restart_guard_window_(options.restart_guard_window),
      script_mode_(options.script_mode) {
  check_redsync_options(options);
  if (members.empty()) throw config_error("Redsync needs at least one node; got 0 nodes");
  pools_.reserve(members.size());
  std::vector<node_options> listened;    // the listener's node per member (unused for a cluster's)
  std::vector<cluster_router*> routers;  // the listener's router per member (null for a standalone one)
  for (auto& spec : members) {
    const bool cluster = !spec.seeds.empty();
    for (const auto& n : cluster ? spec.seeds : std::vector<node_options>{spec.node}) check_node_options(n);
    // The same server twice would cast its vote twice: Redlock's quorum
    // assumes independent masters. (Two names for one server, a host name
    // and its address, cannot be told apart here: node_trust tells them
    // apart by run_id once connected.)
    const std::string text = cluster ? cluster_uri_text(spec.seeds) : std::string();
    const std::string address = cluster ? "cluster " + text.substr(text.find("//") + 2) : spec.node.address();
    for (std::size_t k = 0; k < addresses_.size(); ++k) {
      if (addresses_[k] == address)
        throw config_error(fmt::format(
            "nodes {} and {} are the same server ({}): Redlock needs independent masters, and one server "
            "listed twice would vote twice (a different db on it is no different server)",
            k + 1, addresses_.size() + 1, address));
    }
    addresses_.push_back(address);
    cluster_members_.push_back(cluster);
    if (cluster) {
      has_cluster_ = true;
      uris_.push_back(text);
      listened.push_back(spec.seeds.front());
      pools_.push_back(std::make_unique<member>(
          std::make_unique<cluster_router>(loop_.loop(), std::move(spec.seeds), options)));
      routers.push_back(pools_.back()->router());
    } else {
      const node_options& n = spec.node;
      uris_.push_back(n.unix_path.empty() ? (n.tls.enabled ? "rediss://" : "redis://") + address : address);
      listened.push_back(n);
      routers.push_back(nullptr);
      pools_.push_back(std::make_unique<member>(std::make_unique<node_pool>(loop_.loop(), n, options)));
    }
  }
  size_ = pools_.size();
  cluster_ids_.resize(size_);
  cluster_nodes_.resize(size_);
  telemetry_ = std::make_shared<detail::telemetry>(addresses_, options.observer, options.log);
  for (std::size_t i = 0; i < size_; ++i) {
    auto report = [t = telemetry_, i](pool_event e, std::string_view detail,
                                      std::chrono::steady_clock::time_point sent_at) {
      t->pool(i, e, detail, sent_at);
    };
    if (pools_[i]->pool()) {
      pools_[i]->pool()->on_event(std::move(report));
      continue;
    }
    pools_[i]->on_cluster_event(std::move(report));
    // Per shard: each master's connections, and the router's own work.
    telemetry_->cluster_member(i);
    pools_[i]->router()->on_master_event(
        [t = telemetry_, i](const std::string& address, pool_event e, std::string_view detail) {
          t->shard_pool(i, address, e, detail);
        });
    pools_[i]->router()->on_report([this, t = telemetry_, i, open = info_open_](const router_report& r) {
      t->router(i, r);
      if (r.what == router_event::failover && *open) on_failover_seen(i, r.master);
    });
  }
  std::vector<std::shared_ptr<const tls_context>> tls;
  for (const auto& m : pools_) tls.push_back(m->pool() ? m->pool()->tls() : nullptr);
  // On a cluster member the listener subscribes through its router's slot
  // map (docs/cluster.md, "Wake-ups").
  listener_ = std::make_unique<release_listener>(loop_.loop(), std::move(listened), std::move(tls), options,
                                                 std::move(routers));
  trust_ = std::make_unique<node_trust>(*this, options.restart_guard, options.restart_guard_window);
  // Every connection reads INFO first: node_trust needs the server's
  // run_id to tell whether the node's record (and vote) is verified. On a
  // cluster member, per master: the trust of a slot reads the identity of
  // the master that ran each call (command_result::served_by).
  for (std::size_t i = 0; i < pools_.size(); ++i) {
    if (pools_[i]->pool()) {
      pools_[i]->pool()->on_server_info([this, i, open = info_open_](const reply& info) {
        if (!*open) return;
        // A Redis Cluster node listed as redis://: refused by every round
        // (round.cpp), in words that name the node and its cluster URI.
        // The handshake's INFO precedes the first command's reply.
        cluster_nodes_[i] = info.is_error() ? std::string() : cluster_node_problem(info.str, i + 1, uris_[i]);
        trust_->on_server_info(i, info);
        for (auto& [slot, t] : slot_trust_) t->on_server_info(i, info);
      });
    } else {
      pools_[i]->router()->on_server_info(
          [this, i, open = info_open_](const std::string& address, const reply& info) {
            if (!*open) return;
            cluster_ids_[i][address] = identify_server(info, script_mode_, listed_as::cluster_master);
          });
    }
  }
}

node_trust& engine::trust(std::uint16_t slot) {
  if (!has_cluster_) return *trust_;
  auto& t = slot_trust_[slot];
  if (!t) {
    t = std::make_unique<node_trust>(*this, restart_guard_, restart_guard_window_, slot);
    // The standalone members' identities, as the first trust read them.
    for (std::size_t i = 0; i < size_; ++i) t->copy_identity(i, *trust_);
  }
  return *t;
}

void engine::on_failover_seen(std::size_t i, std::string_view new_master) {
  // The promoted master's window starts now, when this client saw the
  // change, not at its first yes (which may come a whole expiry later,
  // after the holder's release): a look at each slot in use that the new
  // master serves sets the repair's mark there (node_trust.hpp, step 1),
  // and the mark lives on the node, so every client counts from it.
  const cluster_router& router = *pools_[i]->router();
  const slot_map& map = router.map();
  for (auto& [slot, t] : slot_trust_) {
    const std::int32_t owner = map.owner[slot];
    if (owner == slot_map::no_master) continue;
    const cluster_master& m = map.masters[static_cast<std::size_t>(owner)];
    if (node_options{.host = m.host, .port = m.port}.address() == new_master) t->look_now();
  }
  // A replica's connection may have read its INFO before it was promoted:
  // read it now, so its first vote as master finds it (server_mark.hpp).
  pools_[i]->router()->read_identity(std::string(new_master));
}

void engine::read_identity(std::size_t i, const std::string& address) {
  if (cluster_router* router = pools_[i]->router(); router && !address.empty())
    router->read_identity(address);
}

server_identity engine::cluster_identity(std::size_t i, const std::string& address) const {
  const auto& ids = cluster_ids_[i];
  const auto it = ids.find(address);
  return it == ids.end() ? server_identity{} : it->second;
}

void engine::note_expiry(std::chrono::milliseconds expiry) noexcept {
  std::int64_t seen = longest_expiry_ms_.load(std::memory_order_relaxed);
  while (expiry.count() > seen &&
         !longest_expiry_ms_.compare_exchange_weak(seen, expiry.count(), std::memory_order_relaxed)) {
  }
}

namespace {

// Closes `pools` on the loop thread and frees them once every handle is
// closed, then runs `done`. A pool cannot be destroyed from inside its own
// close callback, so the last callback defers the destruction to a zero timer
// whose close callback frees everything.
struct pool_closer {
  std::vector<std::unique_ptr<member>> pools;
  std::unique_ptr<release_listener> listener;
  std::size_t remaining = 0;
  std::function<void()> done;
  uv_timer_t defer{};

  static void start(uv_loop_t* loop, std::vector<std::unique_ptr<member>> pools,
                    std::unique_ptr<release_listener> listener, std::function<void()> done) {
    auto* c = new pool_closer{std::move(pools), std::move(listener), 0, std::move(done), {}};
    uv_timer_init(loop, &c->defer);
    c->defer.data = c;
    c->remaining = c->pools.size() + 1;
    c->listener->close([c] {
      if (--c->remaining == 0) c->finish();
    });
    for (auto& p : c->pools) {
      p->close([c] {
        if (--c->remaining == 0) c->finish();
      });
    }
  }

  void finish() {
    uv_timer_start(
        &defer,
        [](uv_timer_t* t) {
          uv_close(reinterpret_cast<uv_handle_t*>(t), [](uv_handle_t* h) {
            auto* self = static_cast<pool_closer*>(h->data);
            auto done = std::move(self->done);
            delete self;
            if (done) done();
          });
        },
        0, 0);
  }
};

}  // namespace

void engine::wind_up_tasks() {
  // Completing a task removes it from the set: iterate over a copy.
  const std::vector<loop_task*> tasks(tasks_.begin(), tasks_.end());
  for (loop_task* t : tasks) {
    if (tasks_.count(t) != 0) t->on_shutdown();
  }
}

void engine::shut_down(std::function<void()> closed) {
  // Winding up sends what cleanup is due (releases of abandoned acquisitions
  // and of queued unlocks); nothing is sent after it, so the pools can be
  // handed to the closer, which starts once those releases were answered or
  // shutdown_timeout has passed. The closer does not touch the engine: an
  // engine destroyed on its own loop thread is gone by then.
  *info_open_ = false;  // before winding up: its releases' INFO replies come after we may be gone
  wind_up_tasks();
  trust_->close();
  for (auto& [slot, t] : slot_trust_) t->close();
  telemetry_->close();
  struct parts {
    std::vector<std::unique_ptr<member>> pools;
    std::unique_ptr<release_listener> listener;
  };
  auto p = std::make_shared<parts>(parts{std::move(pools_), std::move(listener_)});
  uv_loop_t* loop = loop_.loop();
  drain_->wait(loop, shutdown_timeout_, [loop, p, closed = std::move(closed)]() mutable {
    pool_closer::start(loop, std::move(p->pools), std::move(p->listener), std::move(closed));
  });
}

void engine::destroy(std::shared_ptr<engine> e) {
  if (!e) return;
  e->shutting_down_.store(true, std::memory_order_release);
  if (!e->loop_.on_loop_thread()) return;  // ~engine (as `e` goes) waits for the loop
  event_loop& loop = e->loop_;
  loop.post([e = std::move(e)]() mutable { e.reset(); });
}

engine::~engine() {
  shutting_down_.store(true, std::memory_order_release);
  if (loop_.on_loop_thread()) {
    // Destroyed from its own loop thread (the application's loop, or our own
    // thread): we cannot wait for the loop, so the drain and the closer
    // outlive us, and event_loop hands the loop's teardown to that thread.
    shut_down({});
    return;
  }
  std::promise<void> all_closed;
  loop_.post([this, &all_closed] { shut_down([&all_closed] { all_closed.set_value(); }); });
  all_closed.get_future().wait();
}

}  // namespace redsync::detail
