// A connection's lifecycle: the handles it owns from construction to close(),
// and dropping a dead socket, which fails every command still outstanding.

#include "transport/connection.hpp"

#include "transport/connection_internals.hpp"
#include "transport/write_list.hpp"

#include <cstdio>
#include <exception>
#include <utility>

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

}  // namespace

connection::connection(uv_loop_t* loop, const connection_config& config, connect_listener listener)
    : loop_(loop), config_(config), listener_(std::move(listener)), writes_(write_list::find(loop)) {
  uv_timer_init(loop_, &connect_timer_);
  uv_timer_init(loop_, &deadline_timer_);
  uv_idle_init(loop_, &flush_idle_);
  connect_timer_.data = this;
  deadline_timer_.data = this;
  flush_idle_.data = this;
  own_handles_open_ = 3;

  handshake_ = handshake_commands(config_);
}

connection::~connection() {
  if (state_ != state::closed) {
    std::fputs("redsync: connection destroyed before close() completed\n", stderr);
    std::terminate();
  }
}

// ---- dropping ---------------------------------------------------------------

void connection::drop(const std::string& error) {
  if (state_ != state::connected) return;
  std::vector<std::pair<command_callback, clock::time_point>> failed;
  for (auto* q : {&inflight_, &unsent_}) {
    for (auto& e : *q) {
      if (e.done) failed.emplace_back(std::move(e.done), e.sent_at);
    }
    q->clear();
  }
  handshake_due_.clear();
  handshake_unsent_ = false;
  tls_write_error_.clear();
  uv_timer_stop(&deadline_timer_);
  armed_for_ = clock::time_point::max();
  uv_idle_stop(&flush_idle_);
  unlist_writer();
  detach_socket();
  state_ = state::disconnected;
  if (on_drop_) on_drop_(error);
  const auto now = clock::now();
  for (auto& [done, sent_at] : failed) {
    command_result r;
    r.status = transport_status::unreachable;
    r.error = error;
    r.latency = duration_cast<microseconds>(now - sent_at);
    complete(done, std::move(r));
  }
}

void connection::detach_socket() {
  socket* s = std::exchange(socket_, nullptr);
  if (s == nullptr) return;
  s->owner = nullptr;
  if (uv_is_closing(&s->h.handle) == 0) uv_close(&s->h.handle, &on_socket_closed);
}

void connection::on_socket_closed(uv_handle_t* handle) {
  auto* s = static_cast<socket*>(handle->data);
  connection* notify = s->closing_owner;
  delete s;
  if (notify != nullptr) notify->handle_closed();
}

// ---- closing ----------------------------------------------------------------

void connection::close(std::vector<command_callback>& orphans, std::function<void()> closed) {
  if (state_ == state::closing || state_ == state::closed) return;
  for (auto* q : {&inflight_, &unsent_}) {
    for (auto& e : *q) {
      if (e.done) orphans.push_back(std::move(e.done));
    }
    q->clear();
  }
  handshake_due_.clear();
  if (resolving_ != nullptr) {
    // The request's callback still runs (with UV_EAI_CANCELED, or with the
    // result if it was already resolving) and frees it; it no longer knows us.
    resolving_->owner = nullptr;
    uv_cancel(reinterpret_cast<uv_req_t*>(&resolving_->req));
    resolving_ = nullptr;
  }
  state_ = state::closing;
  unlist_writer();
  closed_ = std::move(closed);
  if (socket_ != nullptr) {
    socket* s = std::exchange(socket_, nullptr);
    s->owner = nullptr;
    s->closing_owner = this;
    ++own_handles_open_;
    uv_close(&s->h.handle, &on_socket_closed);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&connect_timer_), &on_own_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&deadline_timer_), &on_own_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&flush_idle_), &on_own_handle_closed);
}

void connection::on_own_handle_closed(uv_handle_t* handle) {
  static_cast<connection*>(handle->data)->handle_closed();
}

void connection::handle_closed() {
  if (--own_handles_open_ > 0) return;
  state_ = state::closed;
  auto closed = std::move(closed_);
  if (closed) closed();  // may destroy this connection's owner: touch nothing after
}

void close_all(const std::vector<connection*>& conns, std::function<void()> closed) {
  auto remaining = std::make_shared<std::size_t>(0);
  auto done = std::make_shared<std::function<void()>>(std::move(closed));
  for (connection* c : conns) {
    if (c) ++*remaining;
  }
  if (*remaining == 0) return (*done)();
  for (connection* c : conns) {
    if (!c) continue;
    std::vector<command_callback> orphans;
    c->close(orphans, [remaining, done] {
      if (--*remaining == 0) (*done)();
    });
    for (auto& cb : orphans) {
      command_result r;
      r.status = transport_status::shutdown;
      cb(std::move(r));
    }
  }
}

}  // namespace redsync::detail
