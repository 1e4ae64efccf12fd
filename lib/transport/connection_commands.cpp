// Commands on a connected socket: queued, written in coalesced batches, and
// answered in FIFO order by the replies read back; each is bounded by its
// deadline, and the connection by stall detection.

#include "transport/connection.hpp"

#include "transport/connection_internals.hpp"
#include "transport/socket_write.hpp"
#include "transport/write_list.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

long long to_ms(microseconds d) {
  return (d.count() + 999) / 1000;
}

// What answers no command on a subscribed connection (RESP2): a message, a
// sharded one, and the `sunsubscribe` a cluster node sends when a slot left
// it (its subscriptions to that slot's channels end). A SUNSUBSCRIBE's own
// reply has the same shape, so it is a push too: see connection.hpp.
bool is_push(const reply& r) {
  if (r.type != reply::kind::array || r.elements.empty()) return false;
  const std::string& kind = r.elements.front().str;
  return kind == "message" || kind == "smessage" || kind == "sunsubscribe";
}

}  // namespace

void connection::write_if_listed() {
  if (!write_listed_) return;
  write_listed_ = false;
  uv_idle_stop(&flush_idle_);
  flush();
}

void connection::unlist_writer() {
  if (!write_listed_) return;
  write_listed_ = false;
  if (writes_) writes_->remove(this);
}

// ---- sending ----------------------------------------------------------------

void connection::send(wire_command cmd, microseconds timeout, command_callback done, std::uint32_t replies) {
  const auto now = clock::now();
  const auto deadline = now + timeout;
  max_timeout_ = std::max(max_timeout_, timeout);
  unsent_.push_back(
      entry{std::move(done), std::move(cmd), now, deadline, std::max<std::uint32_t>(replies, 1), {}});
  if (deadline < armed_for_) {
    armed_for_ = deadline;
    uv_timer_start(&deadline_timer_, &on_deadline_timer, static_cast<std::uint64_t>(to_ms(timeout)), 0);
  }
  // Coalesce everything sent during this callback into one write: the event
  // loop writes its listed connections (write_list.hpp) as soon as its
  // batch of posted tasks has run. Sent from any other callback (a reply's,
  // a timer's), the idle handle writes it before the loop next polls.
  if (state_ == state::connected && !write_listed_) {
    write_listed_ = true;
    if (writes_) writes_->add(this);
    uv_idle_start(&flush_idle_, &on_flush);
  }
}

void connection::on_flush(uv_idle_t* idle) {
  auto* self = static_cast<connection*>(idle->data);
  uv_idle_stop(idle);
  self->unlist_writer();
  self->flush();
}

void connection::flush() {
  if (state_ != state::connected || socket_ == nullptr) return;
  const bool handshake = handshake_unsent_;
  if (unsent_.empty() && !handshake) return;
  // The buffer lists are members, reused from flush to flush: the usual
  // flush allocates nothing. A write_req is made only for a tail the kernel
  // did not take.
  write_bufs_.clear();
  write_wires_.clear();
  std::size_t total = 0;
  auto add = [this, &total](wire_command wire) {
    write_bufs_.push_back(
        uv_buf_init(const_cast<char*>(wire->data()), static_cast<unsigned int>(wire->size())));
    total += wire->size();
    write_wires_.push_back(std::move(wire));
  };
  if (handshake) {
    for (const auto& h : handshake_) add(h.second);
    handshake_unsent_ = false;
  }
  if (inflight_.empty()) stall_since_ = clock::now();
  for (auto& e : unsent_) {
    add(std::move(e.wire));
    inflight_.push_back(std::move(e));
  }
  unsent_.clear();
  if (socket_->tls) {
    flush_tls();
    return;
  }
  // Write at once when the socket takes it all (the usual case): unlike
  // uv_write, an immediate write leaves the poll set alone, which saves an
  // epoll_ctl per write. Whatever the kernel did not take goes through
  // uv_write, which keeps the order behind earlier queued writes.
  const int wrote = try_write_nosignal(&socket_->h.stream, write_bufs_.data(),
                                       static_cast<unsigned int>(write_bufs_.size()));
  if (wrote < 0 && wrote != UV_EAGAIN) {
    write_wires_.clear();
    drop("connection lost: write: " + uv_error(wrote));
    return;
  }
  std::size_t done = wrote > 0 ? static_cast<std::size_t>(wrote) : 0;
  if (done == total) {
    write_wires_.clear();  // the bytes are the kernel's now
    return;
  }
  auto first = write_bufs_.begin();
  while (done >= first->len) {
    done -= first->len;
    ++first;
  }
  first->base += done;
  first->len -= static_cast<decltype(first->len)>(done);
  auto* w = new write_req;
  w->req.data = w;
  w->bufs.assign(first, write_bufs_.end());
  w->wires.swap(write_wires_);  // keeps the tail's bytes alive until written
  queued_write_started();
  const int rc = uv_write(&w->req, &socket_->h.stream, w->bufs.data(),
                          static_cast<unsigned int>(w->bufs.size()), &on_write);
  if (rc != 0) {
    queued_write_finished();
    delete w;
    drop("connection lost: write: " + uv_error(rc));
  }
}

void connection::on_write(uv_write_t* req, int status) {
  auto* w = static_cast<write_req*>(req->data);
  auto* s = static_cast<socket*>(req->handle->data);
  connection* self = s->owner;
  queued_write_finished();
  delete w;
  if (status == 0 || status == UV_ECANCELED || self == nullptr) return;
  if (self->state_ == state::connecting) {  // a TLS handshake's message
    self->connect_failed("TLS handshake: write: " + uv_error(status));
  } else if (s->tls) {
    self->tls_write_failed(status);
  } else {
    self->drop("connection lost: write: " + uv_error(status));
  }
}

// ---- receiving --------------------------------------------------------------

void connection::on_alloc(uv_handle_t* handle, std::size_t, uv_buf_t* buf) {
  auto* s = static_cast<socket*>(handle->data);
  *buf = uv_buf_init(s->buffer.data(), static_cast<unsigned int>(s->buffer.size()));
}

void connection::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* s = static_cast<socket*>(stream->data);
  connection* self = s->owner;
  if (self == nullptr) return;
  if (nread > 0) {
    if (s->tls) {
      self->handle_tls_data(buf->base, static_cast<std::size_t>(nread));
    } else {
      self->handle_data(buf->base, static_cast<std::size_t>(nread));
    }
  } else if (nread < 0 && self->state_ == state::connecting) {  // in the TLS handshake
    self->connect_failed(nread == UV_EOF ? std::string("TLS handshake: the server closed the connection")
                                         : "TLS handshake: " + uv_error(static_cast<int>(nread)));
  } else if (nread == UV_EOF) {
    self->drop("connection lost: server closed the connection");
  } else if (nread < 0) {
    self->drop("connection lost: " + uv_error(static_cast<int>(nread)));
  }
}

void connection::handle_data(const char* data, std::size_t size) {
  socket* s = socket_;
  const auto now = clock::now();
  stall_since_ = now;
  if (!s->reader.feed(data, size)) {
    drop("protocol error: " + s->reader.error());
    return;
  }
  reply r;
  for (;;) {
    const auto st = s->reader.next(r);
    if (st == resp_reader::status::incomplete) break;
    if (st == resp_reader::status::protocol_error) {
      drop("protocol error: " + s->reader.error());
      return;
    }
    if (!handshake_due_.empty()) {
      // AUTH/SELECT replies precede the user's. On failure the user commands
      // get their own error replies (NOAUTH, ...); remember why, so those
      // results can say so. INFO only informs: its failure (an ACL without
      // INFO, or AUTH having failed) is not the user's commands' cause, but
      // the listener must learn of it (it fails closed).
      if (handshake_due_.front() == "INFO") {
        if (config_.on_server_info) config_.on_server_info(r);
      } else if (r.is_error() && handshake_error_.empty()) {
        handshake_error_ = fmt::format("{} failed: {}", handshake_due_.front(), r.str);
      }
      handshake_due_.pop_front();
      continue;
    }
    if (push_ && is_push(r)) {
      push_(std::move(r));
      r = reply{};
      if (socket_ != s || state_ != state::connected) return;  // the handler closed us
      continue;
    }
    if (inflight_.empty()) {
      drop("protocol error: reply without a command");
      return;
    }
    entry& front = inflight_.front();
    if (front.replies_due > 1) {
      // Not the last reply of a multi-command entry: keep only the first error.
      --front.replies_due;
      if (r.is_error() && front.first_error.empty()) front.first_error = std::move(r.str);
      r = reply{};
      continue;
    }
    entry e = std::move(inflight_.front());
    inflight_.pop_front();
    if (!e.done) continue;  // abandoned after a timeout: drop the late reply
    command_result result;
    result.latency = duration_cast<microseconds>(now - e.sent_at);
    if (!e.first_error.empty()) {
      r = reply{};
      r.type = reply::kind::error;
      r.str = std::move(e.first_error);
    }
    if (r.is_error() && !handshake_error_.empty()) result.error = handshake_error_;
    result.value = std::move(r);
    r = reply{};
    complete(e.done, std::move(result));
    if (socket_ != s || state_ != state::connected) return;  // the callback closed us
  }
  if (!has_outstanding()) {
    uv_timer_stop(&deadline_timer_);
    armed_for_ = clock::time_point::max();
  }
}

// ---- deadlines and stalls ---------------------------------------------------

std::chrono::milliseconds connection::stall_close() const noexcept {
  return std::max<milliseconds>(duration_cast<milliseconds>(max_timeout_ * 10), milliseconds(5000));
}

void connection::on_deadline_timer(uv_timer_t* timer) {
  static_cast<connection*>(timer->data)->expire(clock::now());
}

// Deadlines are mostly but not strictly increasing in FIFO order (timeouts
// differ per command), so the timer is armed at the earliest one and each
// firing scans the queue: O(outstanding) about once per timeout period, and
// the send path only compares one time point.
void connection::expire(clock::time_point now) {
  armed_for_ = clock::time_point::max();
  std::vector<std::pair<command_callback, entry>> expired;
  auto next = clock::time_point::max();
  for (auto& e : inflight_) {
    if (!e.done) continue;
    if (e.deadline <= now) {
      expired.emplace_back(std::exchange(e.done, nullptr),
                           entry{nullptr, nullptr, e.sent_at, e.deadline, 1, {}});
    } else {
      next = std::min(next, e.deadline);
    }
  }
  for (auto it = unsent_.begin(); it != unsent_.end();) {
    if (it->deadline <= now) {
      // Never written: forget it entirely, so it never reaches the server.
      expired.emplace_back(std::move(it->done), entry{nullptr, nullptr, it->sent_at, it->deadline, 1, {}});
      it = unsent_.erase(it);
    } else {
      next = std::min(next, it->deadline);
      ++it;
    }
  }
  bool stalled = false;
  if (!inflight_.empty() && state_ == state::connected) {
    const auto stall_at = stall_since_ + stall_close();
    if (stall_at <= now)
      stalled = true;
    else
      next = std::min(next, stall_at);
  }
  if (next != clock::time_point::max()) {
    armed_for_ = next;
    const auto wait = duration_cast<microseconds>(next - now);
    uv_timer_start(&deadline_timer_, &on_deadline_timer,
                   static_cast<std::uint64_t>(std::max<long long>(to_ms(wait), 1)), 0);
  }
  socket* s = socket_;
  for (auto& [done, e] : expired) {
    command_result r;
    r.status = transport_status::timeout;
    r.error =
        fmt::format("no reply within {} ms", to_ms(duration_cast<microseconds>(e.deadline - e.sent_at)));
    r.latency = duration_cast<microseconds>(now - e.sent_at);
    complete(done, std::move(r));
  }
  if (stalled && socket_ == s && state_ == state::connected) {
    drop(fmt::format("connection stalled: no data from the server for {} ms", stall_close().count()));
  }
}

}  // namespace redsync::detail
