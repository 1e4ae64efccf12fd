#include "transport/connection.hpp"

#include "transport/resp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>

// Invariants:
//  * `unsent_` holds commands queued but not yet handed to uv_write, in send
//    order; `inflight_` holds written commands whose replies are due, in the
//    same order. A reply always belongs to the front of `inflight_` (after the
//    handshake replies in `handshake_due_`).
//  * A timed-out entry in `inflight_` stays there with an empty callback
//    ("abandoned") so its late reply is consumed in order; closing instead
//    would let a later command (e.g. a Redlock release) overtake it on
//    another connection. A timed-out entry in `unsent_` was never written and
//    is simply removed.
//  * State is made consistent before any user callback runs, and after each
//    callback the code re-checks that the socket it was working on is still
//    current (a callback may close the pool or drop the connection).

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// A user callback must not throw: there is no caller to throw to (we are in a
// libuv callback). noexcept turns a throw into std::terminate.
void complete(command_callback& done, command_result&& result) noexcept {
  done(std::move(result));
}

long long to_ms(microseconds d) {
  return (d.count() + 999) / 1000;
}

std::string uv_error(int status) {
  return uv_strerror(status);
}

}  // namespace

struct connection::socket {
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } h;
  uv_connect_t connect_req{};
  // Null once detached: callbacks of a detached socket do nothing.
  connection* owner = nullptr;
  // Set by connection::close(): the close callback reports to it.
  connection* closing_owner = nullptr;
  resp_reader reader;
  std::array<char, 64 * 1024> buffer;

  explicit socket(connection* c) : owner(c) {
    std::memset(&h, 0, sizeof h);
    h.handle.data = this;
    connect_req.data = this;
  }
};

struct connection::write_req {
  uv_write_t req{};
  std::vector<wire_command> wires;  // keeps the bytes alive until written
  std::vector<uv_buf_t> bufs;
};

struct connection::resolve_req {
  uv_getaddrinfo_t req{};
  connection* owner = nullptr;  // null once cancelled
};

connection::connection(uv_loop_t* loop, const connection_config& config, connect_listener listener)
    : loop_(loop), config_(config), listener_(std::move(listener)) {
  uv_timer_init(loop_, &connect_timer_);
  uv_timer_init(loop_, &deadline_timer_);
  uv_idle_init(loop_, &flush_idle_);
  connect_timer_.data = this;
  deadline_timer_.data = this;
  flush_idle_.data = this;
  own_handles_open_ = 3;

  const node_options& n = config_.node;
  if (!n.password.empty()) {
    std::vector<std::string_view> argv{"AUTH"};
    if (!n.username.empty()) argv.push_back(n.username);
    argv.push_back(n.password);
    handshake_.emplace_back("AUTH", encode_command(argv));
  }
  if (n.db != 0) {
    const std::string db = std::to_string(n.db);
    handshake_.emplace_back("SELECT " + db, encode_command({"SELECT", db}));
  }
  // Plain INFO (the default sections, on every Redis version): server for
  // run_id, replication for the role and replication id, memory for the
  // eviction policy.
  if (config_.on_server_info) handshake_.emplace_back("INFO", encode_command({"INFO"}));
}

connection::~connection() {
  if (state_ != state::closed) {
    std::fputs("redsync: connection destroyed before close() completed\n", stderr);
    std::terminate();
  }
}

std::chrono::milliseconds connection::stall_close() const noexcept {
  return std::max<milliseconds>(duration_cast<milliseconds>(max_timeout_ * 10), milliseconds(5000));
}

// ---- connecting -------------------------------------------------------------

void connection::connect() {
  if (state_ != state::disconnected) return;
  state_ = state::connecting;
  pending_connect_error_.clear();
  last_connect_error_.clear();
  handshake_error_.clear();
  addresses_.clear();
  next_address_ = 0;
  uv_timer_start(&connect_timer_, &on_connect_timer,
                 static_cast<std::uint64_t>(config_.connect_timeout.count()), 0);

  const node_options& n = config_.node;
  if (!n.unix_path.empty()) {
    auto* s = new socket(this);
    if (int rc = uv_pipe_init(loop_, &s->h.pipe, 0); rc != 0) {
      delete s;
      pending_connect_error_ = "connect: " + uv_error(rc);
      uv_timer_start(&connect_timer_, &on_connect_timer, 0, 0);
      return;
    }
    socket_ = s;
    // Reports failures through on_connected, never inline.
    uv_pipe_connect(&s->connect_req, &s->h.pipe, n.unix_path.c_str(), &on_connected);
    return;
  }

  sockaddr_storage addr{};
  if (uv_ip4_addr(n.host.c_str(), n.port, reinterpret_cast<sockaddr_in*>(&addr)) == 0 ||
      uv_ip6_addr(n.host.c_str(), n.port, reinterpret_cast<sockaddr_in6*>(&addr)) == 0) {
    addresses_.push_back(addr);
    try_next_address();
    return;
  }

  auto* r = new resolve_req;
  r->owner = this;
  r->req.data = r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string port = std::to_string(n.port);
  if (int rc = uv_getaddrinfo(loop_, &r->req, &on_resolved, n.host.c_str(), port.c_str(), &hints); rc != 0) {
    delete r;
    pending_connect_error_ = fmt::format("resolve {}: {}", n.host, uv_error(rc));
    uv_timer_start(&connect_timer_, &on_connect_timer, 0, 0);
    return;
  }
  resolving_ = r;
}

void connection::on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
  auto* r = static_cast<resolve_req*>(req->data);
  connection* self = r->owner;
  delete r;
  if (self == nullptr) {  // cancelled: the attempt is over
    if (res != nullptr) uv_freeaddrinfo(res);
    return;
  }
  self->resolving_ = nullptr;
  if (status != 0) {
    if (res != nullptr) uv_freeaddrinfo(res);
    self->connect_failed(fmt::format("resolve {}: {}", self->config_.node.host, uv_error(status)));
    return;
  }
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addr == nullptr || ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    sockaddr_storage addr{};
    std::memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    self->addresses_.push_back(addr);
  }
  uv_freeaddrinfo(res);
  if (self->addresses_.empty()) {
    self->connect_failed(fmt::format("resolve {}: no address", self->config_.node.host));
    return;
  }
  self->try_next_address();
}

// Tries the resolved addresses in order (e.g. ::1 then 127.0.0.1 for
// "localhost"); the connect timer bounds the whole attempt.
void connection::try_next_address() {
  while (next_address_ < addresses_.size()) {
    const auto* addr = reinterpret_cast<const sockaddr*>(&addresses_[next_address_]);
    auto* s = new socket(this);
    int rc = uv_tcp_init(loop_, &s->h.tcp);
    if (rc != 0) {
      delete s;
      last_connect_error_ = uv_error(rc);
      break;
    }
    uv_tcp_nodelay(&s->h.tcp, 1);
    rc = uv_tcp_connect(&s->connect_req, &s->h.tcp, addr, &on_connected);
    if (rc == 0) {
      socket_ = s;
      return;
    }
    last_connect_error_ = uv_error(rc);
    s->owner = nullptr;
    uv_close(&s->h.handle, &on_socket_closed);
    ++next_address_;
  }
  // Every address failed synchronously: report from the timer so that
  // connect() (called from send()) never completes inline.
  pending_connect_error_ = "connect: " + last_connect_error_;
  uv_timer_start(&connect_timer_, &on_connect_timer, 0, 0);
}

void connection::on_connected(uv_connect_t* req, int status) {
  auto* s = static_cast<socket*>(req->data);
  if (status == UV_ECANCELED || s->owner == nullptr) return;  // closed meanwhile
  connection* self = s->owner;
  if (status != 0) {
    self->last_connect_error_ = uv_error(status);
    self->detach_socket();
    if (!self->config_.node.unix_path.empty()) {
      self->connect_failed("connect: " + self->last_connect_error_);
      return;
    }
    ++self->next_address_;
    self->try_next_address();
    return;
  }
  uv_timer_stop(&self->connect_timer_);
  if (int rc = uv_read_start(&s->h.stream, &on_alloc, &on_read); rc != 0) {
    self->detach_socket();
    self->connect_failed("connect: read: " + uv_error(rc));
    return;
  }
  self->state_ = state::connected;
  self->listener_(nullptr);
  self->handshake_and_flush();
}

void connection::on_connect_timer(uv_timer_t* timer) {
  auto* self = static_cast<connection*>(timer->data);
  if (self->state_ != state::connecting) return;
  std::string error =
      !self->pending_connect_error_.empty()
          ? std::move(self->pending_connect_error_)
          : fmt::format("connect: timed out after {} ms", self->config_.connect_timeout.count());
  self->connect_failed(std::move(error));
}

void connection::connect_failed(std::string error) {
  uv_timer_stop(&connect_timer_);
  uv_idle_stop(&flush_idle_);
  if (resolving_ != nullptr) {
    resolving_->owner = nullptr;
    uv_cancel(reinterpret_cast<uv_req_t*>(&resolving_->req));
    resolving_ = nullptr;
  }
  detach_socket();
  addresses_.clear();
  state_ = state::disconnected;
  // Nothing was written yet: only unsent commands can be waiting.
  std::deque<entry> failed;
  failed.swap(unsent_);
  uv_timer_stop(&deadline_timer_);
  armed_for_ = clock::time_point::max();
  listener_(&error);
  const auto now = clock::now();
  for (auto& e : failed) {
    command_result r;
    r.status = transport_status::unreachable;
    r.error = error;
    r.latency = duration_cast<microseconds>(now - e.sent_at);
    complete(e.done, std::move(r));
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

// ---- sending ----------------------------------------------------------------

void connection::send(wire_command cmd, microseconds timeout, command_callback done) {
  const auto now = clock::now();
  const auto deadline = now + timeout;
  max_timeout_ = std::max(max_timeout_, timeout);
  unsent_.push_back(entry{std::move(done), std::move(cmd), now, deadline});
  if (deadline < armed_for_) {
    armed_for_ = deadline;
    uv_timer_start(&deadline_timer_, &on_deadline_timer, static_cast<std::uint64_t>(to_ms(timeout)), 0);
  }
  // Coalesce everything sent during this loop iteration into one write. An
  // active idle handle also keeps the next poll from blocking.
  if (state_ == state::connected && uv_is_active(reinterpret_cast<uv_handle_t*>(&flush_idle_)) == 0) {
    uv_idle_start(&flush_idle_, &on_flush);
  }
}

void connection::on_flush(uv_idle_t* idle) {
  auto* self = static_cast<connection*>(idle->data);
  uv_idle_stop(idle);
  self->flush();
}

void connection::handshake_and_flush() {
  handshake_due_.clear();
  for (const auto& h : handshake_) handshake_due_.push_back(h.first);
  handshake_unsent_ = !handshake_.empty();
  flush();
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
  // Write at once when the socket takes it all (the usual case): unlike
  // uv_write, uv_try_write leaves the poll set alone, which saves an
  // epoll_ctl per write. Whatever the kernel did not take goes through
  // uv_write, which keeps the order behind earlier queued writes.
  const int wrote =
      uv_try_write(&socket_->h.stream, write_bufs_.data(), static_cast<unsigned int>(write_bufs_.size()));
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
  const int rc = uv_write(&w->req, &socket_->h.stream, w->bufs.data(),
                          static_cast<unsigned int>(w->bufs.size()), &on_write);
  if (rc != 0) {
    delete w;
    drop("connection lost: write: " + uv_error(rc));
  }
}

void connection::on_write(uv_write_t* req, int status) {
  auto* w = static_cast<write_req*>(req->data);
  auto* s = static_cast<socket*>(req->handle->data);
  connection* self = s->owner;
  delete w;
  if (status != 0 && status != UV_ECANCELED && self != nullptr) {
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
    self->handle_data(buf->base, static_cast<std::size_t>(nread));
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
    if (push_ && r.type == reply::kind::array && !r.elements.empty() && r.elements.front().str == "message") {
      push_(std::move(r));
      r = reply{};
      if (socket_ != s || state_ != state::connected) return;  // the handler closed us
      continue;
    }
    if (inflight_.empty()) {
      drop("protocol error: reply without a command");
      return;
    }
    entry e = std::move(inflight_.front());
    inflight_.pop_front();
    if (!e.done) continue;  // abandoned after a timeout: drop the late reply
    command_result result;
    result.latency = duration_cast<microseconds>(now - e.sent_at);
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

// ---- failures and deadlines -------------------------------------------------

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
  uv_timer_stop(&deadline_timer_);
  armed_for_ = clock::time_point::max();
  uv_idle_stop(&flush_idle_);
  detach_socket();
  state_ = state::disconnected;
  const auto now = clock::now();
  for (auto& [done, sent_at] : failed) {
    command_result r;
    r.status = transport_status::unreachable;
    r.error = error;
    r.latency = duration_cast<microseconds>(now - sent_at);
    complete(done, std::move(r));
  }
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
      expired.emplace_back(std::exchange(e.done, nullptr), entry{nullptr, nullptr, e.sent_at, e.deadline});
    } else {
      next = std::min(next, e.deadline);
    }
  }
  for (auto it = unsent_.begin(); it != unsent_.end();) {
    if (it->deadline <= now) {
      // Never written: forget it entirely, so it never reaches the server.
      expired.emplace_back(std::move(it->done), entry{nullptr, nullptr, it->sent_at, it->deadline});
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

}  // namespace redsync::detail
