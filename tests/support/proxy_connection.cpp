// Test support: forwarding for one tcp_proxy connection (see the header).
//
// Lifetime: the four handles (two sockets, two timers) are closed together
// by close(); libuv runs every pending write, shutdown and connect callback
// (with UV_ECANCELED) before a handle's close callback, so the object is freed
// in the last close callback and no callback ever sees freed memory. Every
// path that may close first checks `closing()` before touching the sockets.
#include "proxy_connection.hpp"

#include <algorithm>

namespace redsync::test::detail {
namespace {

// Above this many bytes queued or being written in one direction, the proxy
// stops reading that direction's source, so a slow or stalled destination
// pushes back on the sender through TCP instead of filling memory.
constexpr std::size_t max_pending_bytes = 4 * 1024 * 1024;

void close_socket(uv_tcp_t& socket, bool reset, uv_close_cb on_closed) {
#if UV_VERSION_HEX >= 0x012000  // uv_tcp_close_reset: libuv 1.32
  // Fails (and leaves the handle open) for a socket that never connected or
  // has a shutdown pending; a plain close does then.
  if (reset && uv_tcp_close_reset(&socket, on_closed) == 0) return;
#else
  (void)reset;
#endif
  uv_close(reinterpret_cast<uv_handle_t*>(&socket), on_closed);
}

}  // namespace

proxy_connection::proxy_connection(proxy_shared& shared) : shared_(shared) {
  up_ = direction{.owner = this, .from = &client_, .to = &upstream_, .forwarded = &shared.bytes_up};
  down_ = direction{.owner = this, .from = &upstream_, .to = &client_, .forwarded = &shared.bytes_down};
  uv_tcp_init(shared.loop, &client_);
  uv_tcp_init(shared.loop, &upstream_);
  uv_timer_init(shared.loop, &up_.timer);
  uv_timer_init(shared.loop, &down_.timer);
  handles_open_ = 4;
  // Every handle points at the direction it serves; a socket serves the
  // direction that reads from it.
  client_.data = &up_;
  upstream_.data = &down_;
  up_.timer.data = &up_;
  down_.timer.data = &down_;
  connect_req_.data = this;
  shared.connections.insert(this);
}

void proxy_connection::accept(uv_stream_t* listener, proxy_shared& shared, bool refuse) {
  auto* c = new proxy_connection(shared);
  if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&c->client_)) != 0) {
    c->close(false);
    return;
  }
  ++shared.accepted;
  if (refuse) {
    c->close(true);
    return;
  }
  uv_tcp_nodelay(&c->client_, 1);
  c->apply_mode();
}

void proxy_connection::apply_mode() {
  if (closing() || state_ == state::connecting) return;
  if (shared_.current == proxy_shared::mode::stall) {
    for (direction* way : {&up_, &down_}) {
      update_reading(*way);
      uv_timer_stop(&way->timer);
    }
    return;
  }
  if (state_ == state::held) {
    connect_upstream();
    return;
  }
  if (shared_.current == proxy_shared::mode::normal) {
    for (direction* way : {&up_, &down_})
      for (auto& chunk : way->queue) chunk.due = 0;
  }
  for (direction* way : {&up_, &down_}) {
    pump(*way);
    update_reading(*way);
  }
}

void proxy_connection::connect_upstream() {
  state_ = state::connecting;
  sockaddr_in addr{};
  uv_ip4_addr("127.0.0.1", shared_.target_port, &addr);
  if (uv_tcp_connect(&connect_req_, &upstream_, reinterpret_cast<const sockaddr*>(&addr), &on_connect) != 0)
    close(false);
}

void proxy_connection::on_connect(uv_connect_t* req, int status) {
  auto* c = static_cast<proxy_connection*>(req->data);
  if (status == UV_ECANCELED || c->closing()) return;
  if (status < 0) {
    // The upstream refused or is gone: the client sees its connection close.
    c->close(false);
    return;
  }
  uv_tcp_nodelay(&c->upstream_, 1);
  c->state_ = state::open;
  c->apply_mode();
}

void proxy_connection::update_reading(direction& way) {
  if (closing()) return;
  const bool wanted = state_ == state::open && shared_.current != proxy_shared::mode::stall && !way.eof &&
                      way.pending < max_pending_bytes;
  if (wanted == way.reading) return;
  auto* from = reinterpret_cast<uv_stream_t*>(way.from);
  if (!wanted) {
    uv_read_stop(from);
    way.reading = false;
  } else if (uv_read_start(from, &on_alloc, &on_read) == 0) {
    way.reading = true;
  } else {
    close(true);
  }
}

void proxy_connection::on_alloc(uv_handle_t* handle, std::size_t, uv_buf_t* buf) {
  auto& buffer = static_cast<direction*>(handle->data)->owner->shared_.read_buffer;
  *buf = uv_buf_init(buffer.data(), static_cast<unsigned>(buffer.size()));
}

void proxy_connection::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto& way = *static_cast<direction*>(stream->data);
  proxy_connection& c = *way.owner;
  if (nread == 0 || c.closing()) return;
  if (nread == UV_EOF) {
    // Half-close: once everything read before the EOF is written, the other
    // side is shut down for writing; the pair closes when both ways ended.
    uv_read_stop(stream);
    way.reading = false;
    way.eof = true;
    c.finish_if_drained(way);
    return;
  }
  if (nread < 0) {
    c.close(true);
    return;
  }
  const auto& shared = c.shared_;
  uv_update_time(shared.loop);
  std::uint64_t due = uv_now(shared.loop);
  if (shared.current == proxy_shared::mode::delay) {
    std::uniform_int_distribution<std::int64_t> jitter(0, shared.jitter.count());
    due += static_cast<std::uint64_t>(shared.delay.count() + jitter(c.shared_.random));
  }
  way.queue.push_back({std::string(buf->base, static_cast<std::size_t>(nread)), due});
  way.pending += static_cast<std::size_t>(nread);
  c.pump(way);
  c.update_reading(way);
}

void proxy_connection::pump(direction& way) {
  if (state_ != state::open || shared_.current == proxy_shared::mode::stall) return;
  const std::uint64_t now = uv_now(shared_.loop);
  // Only the front chunk's due time is waited for: a later chunk with an
  // earlier due time (jitter) waits behind it, so order is kept.
  while (!way.queue.empty() && way.queue.front().due <= now) {
    write(way, std::move(way.queue.front().bytes));
    way.queue.pop_front();
    if (closing()) return;
  }
  if (way.queue.empty()) {
    uv_timer_stop(&way.timer);
    finish_if_drained(way);
  } else {
    uv_timer_start(&way.timer, &on_timer, way.queue.front().due - now, 0);
  }
}

void proxy_connection::on_timer(uv_timer_t* timer) {
  auto& way = *static_cast<direction*>(timer->data);
  way.owner->pump(way);
}

void proxy_connection::write(direction& way, std::string bytes) {
  auto* op = new write_op{.bytes = std::move(bytes), .way = &way};
  op->req.data = op;
  const auto size = op->bytes.size();
  uv_buf_t buf = uv_buf_init(op->bytes.data(), static_cast<unsigned>(size));
  *way.forwarded += size;
  if (uv_write(&op->req, reinterpret_cast<uv_stream_t*>(way.to), &buf, 1, &on_write) != 0) {
    way.pending -= size;
    delete op;
    close(true);
  }
}

void proxy_connection::on_write(uv_write_t* req, int status) {
  auto* op = static_cast<write_op*>(req->data);
  direction& way = *op->way;
  way.pending -= op->bytes.size();
  delete op;
  proxy_connection& c = *way.owner;
  if (status == UV_ECANCELED || c.closing()) return;
  if (status < 0) {
    c.close(true);
    return;
  }
  c.update_reading(way);
  c.finish_if_drained(way);
}

void proxy_connection::finish_if_drained(direction& way) {
  if (state_ != state::open || shared_.current == proxy_shared::mode::stall) return;
  if (!way.eof || way.finished || way.pending != 0) return;
  way.finished = true;
  if (other(way).finished) {
    close(false);
    return;
  }
  way.shutdown_req.data = &way;
  if (uv_shutdown(&way.shutdown_req, reinterpret_cast<uv_stream_t*>(way.to), &on_shutdown) != 0) close(false);
}

void proxy_connection::on_shutdown(uv_shutdown_t* req, int status) {
  auto& way = *static_cast<direction*>(req->data);
  if (status < 0 && status != UV_ECANCELED) way.owner->close(true);
}

void proxy_connection::close(bool reset) {
  if (closing()) return;
  state_ = state::closing;
  close_socket(client_, reset, &on_handle_closed);
  close_socket(upstream_, reset, &on_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&up_.timer), &on_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&down_.timer), &on_handle_closed);
}

void proxy_connection::on_handle_closed(uv_handle_t* handle) {
  proxy_connection* c = static_cast<direction*>(handle->data)->owner;
  if (--c->handles_open_ > 0) return;
  c->shared_.connections.erase(c);
  delete c;
}

}  // namespace redsync::test::detail
