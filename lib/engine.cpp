#include "engine.hpp"

#include "options_check.hpp"

#include <redsync/error.hpp>

#include <uv.h>

#include <fmt/format.h>

#include <charconv>
#include <future>

namespace redsync::detail {

engine::engine(std::vector<node_options> nodes, const redsync_options& options)
    : loop_(options.loop),
      shutdown_timeout_(options.shutdown_timeout),
      rng_(std::random_device{}()),
      restart_guard_(options.restart_guard) {
  check_redsync_options(options);
  if (nodes.empty()) throw config_error("Redsync needs at least one node; got 0 nodes");
  pools_.reserve(nodes.size());
  for (const auto& n : nodes) {
    check_node_options(n);
    addresses_.push_back(n.address());
    pools_.push_back(std::make_unique<node_pool>(loop_.loop(), n, options));
  }
  size_ = pools_.size();
  listener_ = std::make_unique<release_listener>(loop_.loop(), std::move(nodes), options);
  starts_.resize(pools_.size());
  if (restart_guard_) {
    for (std::size_t i = 0; i < pools_.size(); ++i) {
      pools_[i]->on_server_info([this, i](std::string_view info) { on_server_info(i, info); });
    }
  }
}

void engine::note_expiry(std::chrono::milliseconds expiry) noexcept {
  std::int64_t seen = longest_expiry_ms_.load(std::memory_order_relaxed);
  while (expiry.count() > seen &&
         !longest_expiry_ms_.compare_exchange_weak(seen, expiry.count(), std::memory_order_relaxed)) {
  }
}

namespace {

std::string_view info_field(std::string_view info, std::string_view key) {
  std::size_t at = 0;
  while ((at = info.find(key, at)) != std::string_view::npos) {
    if ((at == 0 || info[at - 1] == '\n') && at + key.size() < info.size() && info[at + key.size()] == ':') {
      const auto from = at + key.size() + 1;
      const auto to = info.find_first_of("\r\n", from);
      return info.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from);
    }
    at += key.size();
  }
  return {};
}

}  // namespace

void engine::on_server_info(std::size_t i, std::string_view info) {
  const auto run_id = info_field(info, "run_id");
  const auto uptime_text = info_field(info, "uptime_in_seconds");
  std::int64_t uptime_s = 0;
  const auto [end, ec] =
      std::from_chars(uptime_text.data(), uptime_text.data() + uptime_text.size(), uptime_s);
  (void)end;
  if (run_id.empty() || ec != std::errc{}) return;  // not a Redis we understand: leave it counted
  node_start& n = starts_[i];
  n.run_id_changed = n.known && n.run_id != run_id;
  n.run_id.assign(run_id);
  // Uptime has whole-second resolution: count it down, never up.
  n.started_at = std::chrono::steady_clock::now() - std::chrono::seconds(uptime_s);
  n.known = true;
}

bool engine::excluded(std::size_t i, std::string& why) const {
  if (!restart_guard_ || !starts_[i].known) return false;
  const node_start& n = starts_[i];
  const std::chrono::milliseconds longest{longest_expiry_ms_.load(std::memory_order_relaxed)};
  const auto now = std::chrono::steady_clock::now();
  const auto counts_from = n.started_at + longest;
  if (now >= counts_from) return false;
  using fsec = std::chrono::duration<double>;
  why = fmt::format(
      "{} {:.1f} s ago (run_id {}), less than the longest expiry in use ({} ms): it may have lost "
      "keys it held, so its vote counts again in {:.1f} s",
      n.run_id_changed ? "restarted" : "started", fsec(now - n.started_at).count(), n.run_id.substr(0, 8),
      longest.count(), fsec(counts_from - now).count());
  return true;
}

namespace {

// Closes `pools` on the loop thread and frees them once every handle is
// closed, then runs `done`. A pool cannot be destroyed from inside its own
// close callback, so the last callback defers the destruction to a zero timer
// whose close callback frees everything.
struct pool_closer {
  std::vector<std::unique_ptr<node_pool>> pools;
  std::unique_ptr<release_listener> listener;
  std::size_t remaining = 0;
  std::function<void()> done;
  uv_timer_t defer{};

  static void start(uv_loop_t* loop, std::vector<std::unique_ptr<node_pool>> pools,
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
  wind_up_tasks();
  struct parts {
    std::vector<std::unique_ptr<node_pool>> pools;
    std::unique_ptr<release_listener> listener;
  };
  auto p = std::make_shared<parts>(parts{std::move(pools_), std::move(listener_)});
  uv_loop_t* loop = loop_.loop();
  drain_->wait(loop, shutdown_timeout_, [loop, p, closed = std::move(closed)]() mutable {
    pool_closer::start(loop, std::move(p->pools), std::move(p->listener), std::move(closed));
  });
}

engine::~engine() {
  shutting_down_.store(true, std::memory_order_release);
  if (loop_.on_loop_thread()) {
    // An application-owned loop destroying us from its own thread: we cannot
    // wait for the loop, so the drain and the closer outlive us.
    shut_down({});
    return;
  }
  std::promise<void> all_closed;
  loop_.post([this, &all_closed] { shut_down([&all_closed] { all_closed.set_value(); }); });
  all_closed.get_future().wait();
}

}  // namespace redsync::detail
