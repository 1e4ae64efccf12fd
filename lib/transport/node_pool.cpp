// One Redis node: a small pool of pipelined connections, routing, and
// reconnect backoff.

#include "transport/node_pool.hpp"

#include "transport/connection.hpp"
#include "transport/tls_session.hpp"

#include <uv.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <exception>
#include <stdexcept>
#include <utility>

// Backoff is per node, not per connection: a failed connect on any of the
// pool's connections says the node is down, so the other disconnected
// connections fail fast too; connections that are up keep working.
//
// Callbacks that must not run inside send() (fail-fast during backoff,
// anything sent while closing) go through `deferred_`, drained by an idle
// handle on the next loop iteration.

namespace redsync::detail {

struct node_pool::impl {
  using clock = std::chrono::steady_clock;
  enum class state { open, closing, closed };

  struct deferred_call {
    command_callback done;
    command_result result;
  };

  uv_loop_t* loop;
  connection_config config;
  std::size_t size;
  std::chrono::milliseconds backoff_min;
  std::chrono::milliseconds backoff_max;

  // Created on first use, on the loop thread (the pool itself may be
  // constructed on another thread).
  std::vector<std::unique_ptr<connection>> connections;
  bool idle_ready = false;
  uv_idle_t idle{};
  std::deque<deferred_call> deferred;

  int failures = 0;
  clock::time_point retry_at{};
  std::string last_error;

  // Observability: whether the node is up (some connection is), which
  // connections are up now, and which have been up before (a connect there
  // is a reconnect).
  enum class health { unknown, up, down };
  pool_listener listener;
  health node_health = health::unknown;
  bool ever_up = false;
  std::vector<bool> slot_was_up;
  std::vector<bool> slot_up;

  state st = state::open;
  std::size_t closing_left = 0;
  std::function<void()> closed;

  impl(uv_loop_t* l, node_options node, const redsync_options& o)
      : loop(l),
        config{node, o.connect_timeout, make_tls_context(node)},
        size(std::max<std::size_t>(o.pool_size, 1)),
        backoff_min(o.reconnect_backoff_min),
        backoff_max(o.reconnect_backoff_max) {}

  void ensure_idle() {
    if (idle_ready) return;
    uv_idle_init(loop, &idle);
    idle.data = this;
    idle_ready = true;
  }

  void defer(command_callback done, command_result result) {
    ensure_idle();
    deferred.push_back({std::move(done), std::move(result)});
    uv_idle_start(&idle, &on_idle);
  }

  static void on_idle(uv_idle_t* handle) {
    auto* self = static_cast<impl*>(handle->data);
    // Only this batch: callbacks that send again (and fail fast again) are
    // served on the next iteration, so a retry loop cannot starve the loop.
    std::deque<deferred_call> batch;
    batch.swap(self->deferred);
    if (self->deferred.empty()) uv_idle_stop(handle);
    for (auto& call : batch) {
      if (self->st != state::open && call.result.status != transport_status::shutdown) {
        call.result = shutdown_result();  // close() was called by an earlier callback
      }
      complete(call.done, std::move(call.result));
    }
    self->maybe_finish_close();
  }

  static command_result shutdown_result() {
    command_result r;
    r.status = transport_status::shutdown;
    r.error = "node pool closed";
    return r;
  }

  connection& connection_for(std::size_t slot) {
    auto& c = connections[slot];
    if (!c) {
      c = std::make_unique<connection>(
          loop, config, [this, slot](const std::string* error) { on_connect_result(slot, error); });
      c->set_drop_listener([this, slot](const std::string& error) { on_connection_health(slot, &error); });
    }
    return *c;
  }

  void report(pool_event e, std::string_view detail) const {
    if (listener) listener(e, detail, clock::time_point{});
  }

  // Connection events, once per change: unreachable once per outage, a
  // reconnect when the node was down or this connection had been up.
  // A failed connect or a dropped connection makes the node unreachable
  // only when no other connection to it is up (pool_size > 1).
  void on_connection_health(std::size_t slot, const std::string* error) {
    if (slot_was_up.size() < size) slot_was_up.resize(size, false);
    if (slot_up.size() < size) slot_up.resize(size, false);
    if (error != nullptr) {
      slot_up[slot] = false;
      const bool any_up = std::find(slot_up.begin(), slot_up.end(), true) != slot_up.end();
      if (!any_up && node_health != health::down) {
        node_health = health::down;
        report(pool_event::unreachable, *error);
      }
      return;
    }
    const bool was_down = node_health == health::down;
    const bool again = slot_was_up[slot];
    node_health = health::up;
    slot_was_up[slot] = true;
    slot_up[slot] = true;
    if (!ever_up) {
      ever_up = true;
      report(pool_event::connected, {});
    } else if (was_down || again) {
      report(pool_event::reconnected, {});
    }
  }

  void on_connect_result(std::size_t slot, const std::string* error) {
    on_connection_health(slot, error);
    if (error == nullptr) {
      failures = 0;
      retry_at = {};
      last_error.clear();
      return;
    }
    // min * 2^failures, capped at max.
    auto delay = backoff_min;
    for (int i = 0; i < failures && delay < backoff_max; ++i) delay *= 2;
    delay = std::min(delay, backoff_max);
    ++failures;
    retry_at = clock::now() + delay;
    last_error = *error;
  }

  void send(std::uint64_t route, wire_command cmd, std::chrono::microseconds timeout, command_callback done,
            std::uint32_t replies) {
    if (st == state::closed) throw std::logic_error("node_pool::send after close completed");
    if (st == state::closing) {
      defer(std::move(done), shutdown_result());
      return;
    }
    if (connections.empty()) connections.resize(size);
    connection& c = connection_for(static_cast<std::size_t>(route % size));
    if (c.current_state() == connection::state::disconnected) {
      const auto now = clock::now();
      if (now < retry_at) {
        command_result r;
        r.status = transport_status::unreachable;
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(retry_at - now);
        r.error = fmt::format("node down: reconnect in {} ms after: {}", left.count(), last_error);
        defer(std::move(done), std::move(r));
        return;
      }
      c.connect();
    }
    c.send(std::move(cmd), timeout, std::move(done), replies);
  }

  void close(std::function<void()> on_closed) {
    if (st != state::open) throw std::logic_error("node_pool::close called twice");
    st = state::closing;
    closed = std::move(on_closed);
    ensure_idle();
    std::vector<command_callback> orphans;
    closing_left = 0;
    for (auto& c : connections) {
      if (!c) continue;
      ++closing_left;
      c->close(orphans, [this] {
        --closing_left;
        maybe_finish_close();
      });
    }
    for (auto& call : deferred) call.result = shutdown_result();
    for (auto& done : orphans) deferred.push_back({std::move(done), shutdown_result()});
    // Always finish from a callback, never inside close() itself.
    uv_idle_start(&idle, &on_idle);
  }

  void maybe_finish_close() {
    if (st != state::closing || closing_left > 0 || !deferred.empty()) return;
    if (uv_is_closing(reinterpret_cast<uv_handle_t*>(&idle)) != 0) return;
    uv_close(reinterpret_cast<uv_handle_t*>(&idle), [](uv_handle_t* h) {
      auto* self = static_cast<impl*>(h->data);
      self->st = state::closed;
      auto cb = std::move(self->closed);
      if (cb) cb();  // may destroy the pool: touch nothing after
    });
  }
};

node_pool::node_pool(uv_loop_s* loop, node_options node, const redsync_options& options)
    : address_(node.address()), impl_(std::make_unique<impl>(loop, std::move(node), options)) {}

node_pool::~node_pool() {
  if (impl_ && (impl_->idle_ready || !impl_->connections.empty()) && impl_->st != impl::state::closed) {
    // Its handles are still registered with the loop and point at us.
    std::fputs("redsync: node_pool destroyed before close() completed\n", stderr);
    std::terminate();
  }
}

void node_pool::send(std::uint64_t route, wire_command cmd, std::chrono::microseconds timeout,
                     command_callback done, std::uint32_t replies) {
  impl_->send(route, std::move(cmd), timeout, std::move(done), replies);
}

void node_pool::close(std::function<void()> closed) {
  impl_->close(std::move(closed));
}

void node_pool::on_event(pool_listener listener) {
  impl_->listener = std::move(listener);
}

void node_pool::note(pool_event e, std::string_view detail,
                     std::chrono::steady_clock::time_point sent_at) const {
  if (impl_->listener) impl_->listener(e, detail, sent_at);
}

std::shared_ptr<const tls_context> node_pool::tls() const {
  return impl_->config.tls;
}

void node_pool::on_server_info(std::function<void(const reply& info)> listener) {
  impl_->config.on_server_info = std::move(listener);
}

}  // namespace redsync::detail
