// Connecting: the handshake commands, resolving the host, connecting over TCP
// (each resolved address in turn) or a unix socket, and failing the attempt.

#include "transport/connection.hpp"

#include "transport/connection_internals.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redsync::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

}  // namespace

std::vector<std::pair<std::string, wire_command>> handshake_commands(const connection_config& config) {
  std::vector<std::pair<std::string, wire_command>> handshake;
  const node_options& n = config.node;
  if (!n.password.empty()) {
    std::vector<std::string_view> argv{"AUTH"};
    if (!n.username.empty()) argv.push_back(n.username);
    argv.push_back(n.password);
    handshake.emplace_back("AUTH", encode_command(argv));
  }
  if (n.db != 0) {
    const std::string db = std::to_string(n.db);
    handshake.emplace_back("SELECT " + db, encode_command({"SELECT", db}));
  }
  // Plain INFO (the default sections, on every Redis version): server for
  // run_id, replication for the role and replication id, memory for the
  // eviction policy.
  if (config.on_server_info) handshake.emplace_back("INFO", encode_command({"INFO"}));
  return handshake;
}

void connection::connect() {
  if (state_ != state::disconnected) return;
  state_ = state::connecting;
  pending_connect_error_.clear();
  last_connect_error_.clear();
  handshake_error_.clear();
  tls_write_error_.clear();
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
  if (int rc = uv_read_start(&s->h.stream, &on_alloc, &on_read); rc != 0) {
    self->detach_socket();
    self->connect_failed("connect: read: " + uv_error(rc));
    return;
  }
  if (self->config_.tls) {
    self->start_tls();  // connected once the TLS handshake is done
    return;
  }
  uv_timer_stop(&self->connect_timer_);
  self->state_ = state::connected;
  self->listener_(nullptr);
  self->handshake_and_flush();
}

void connection::handshake_and_flush() {
  handshake_due_.clear();
  for (const auto& h : handshake_) handshake_due_.push_back(h.first);
  handshake_unsent_ = !handshake_.empty();
  flush();
}

void connection::on_connect_timer(uv_timer_t* timer) {
  auto* self = static_cast<connection*>(timer->data);
  if (self->state_ != state::connecting) return;
  const bool in_tls = self->socket_ != nullptr && self->socket_->tls != nullptr;
  std::string error =
      !self->pending_connect_error_.empty() ? std::move(self->pending_connect_error_)
      : in_tls ? fmt::format("TLS handshake: no answer from the server within the connect timeout ({} ms)",
                             self->config_.connect_timeout.count())
               : fmt::format("connect: timed out after {} ms", self->config_.connect_timeout.count());
  self->connect_failed(std::move(error));
}

void connection::connect_failed(std::string error) {
  uv_timer_stop(&connect_timer_);
  uv_idle_stop(&flush_idle_);
  unlist_writer();
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

}  // namespace redsync::detail
