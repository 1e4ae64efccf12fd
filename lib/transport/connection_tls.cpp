// A connection to a TLS node: the TLS handshake between the TCP connect and
// the Redis handshake, and records in both directions through the socket's
// tls_session. The plain path never comes here.
//
// The connection stays `connecting` (and the connect timer runs) until the
// TLS handshake is done, so a server that accepts and never answers fails the
// attempt after connect_timeout, like one that never accepts. A handshake
// failure is the attempt's error, in OpenSSL's words. In TLS 1.3 a server
// that wants a client certificate refuses only after our side of the
// handshake is done: its alert is the first thing read afterwards, and the
// drop says so (tls_session::read).

#include "transport/connection.hpp"

#include "transport/connection_internals.hpp"
#include "transport/socket_write.hpp"

#include <string>
#include <utility>

namespace redsync::detail {

void connection::start_tls() {
  socket_->tls = std::make_unique<tls_session>(*config_.tls);
  continue_tls_handshake();
}

void connection::continue_tls_handshake() {
  socket* s = socket_;
  const tls_session::progress p = s->tls->handshake();
  // Our next handshake message, or on failure the alert that tells the
  // server why (best effort: the attempt fails either way).
  const int rc = s->tls->has_output() ? send_tls_output() : 0;
  if (p == tls_session::progress::failed) {
    connect_failed("TLS handshake: " + s->tls->error());
    return;
  }
  if (rc != 0) {
    connect_failed("TLS handshake: write: " + uv_error(rc));
    return;
  }
  if (p == tls_session::progress::pending) return;
  uv_timer_stop(&connect_timer_);
  state_ = state::connected;
  listener_(nullptr);
  handshake_and_flush();
  // Records that came with the handshake's last flight (a session ticket, an
  // alert) are still buffered in the session.
  if (socket_ == s && state_ == state::connected) deliver_tls_plaintext();
}

void connection::handle_tls_data(const char* data, std::size_t size) {
  socket_->tls->feed(data, size);
  if (state_ == state::connecting) {
    continue_tls_handshake();
  } else {
    deliver_tls_plaintext();
  }
}

void connection::deliver_tls_plaintext() {
  socket* s = socket_;
  s->plain.clear();
  const bool open = s->tls->read(s->plain);
  // A post-handshake message may want an answer (a KeyUpdate).
  if (s->tls->has_output() && tls_write_error_.empty()) {
    if (const int rc = send_tls_output(); rc != 0) tls_write_failed(rc);
  }
  if (!s->plain.empty()) {
    // The socket, and so `plain`, outlives a drop inside handle_data until
    // its close callback runs on a later loop iteration.
    handle_data(s->plain.data(), s->plain.size());
    if (socket_ != s || state_ != state::connected) return;
  }
  if (!open) drop("connection lost: TLS: " + s->tls->error());
}

// flush() for a TLS node: the batch (already moved to inflight_) is
// encrypted as one plaintext, so many small commands share records.
void connection::flush_tls() {
  if (!tls_write_error_.empty()) return;  // the read side drops us
  tls_plain_.clear();
  for (const uv_buf_t& b : write_bufs_) tls_plain_.append(b.base, b.len);
  write_wires_.clear();
  if (!socket_->tls->write(tls_plain_.data(), tls_plain_.size())) {
    drop("connection lost: TLS: " + socket_->tls->error());
    return;
  }
  if (const int rc = send_tls_output(); rc != 0) tls_write_failed(rc);
}

// A server that refuses us after the handshake (no client certificate, in
// TLS 1.3) sends an alert and closes; our next write then meets a reset
// while the alert still waits in the receive queue. Reading it says why,
// where dropping now would only say "connection reset": so stop writing and
// let on_read drop the connection (the socket is readable: the alert, or at
// least the error; commands in flight keep their deadlines meanwhile).
void connection::tls_write_failed(int status) {
  if (tls_write_error_.empty()) tls_write_error_ = "connection lost: write: " + uv_error(status);
}

int connection::send_tls_output() {
  socket_->tls->take_output(tls_out_);
  uv_buf_t buf = uv_buf_init(tls_out_.data(), static_cast<unsigned int>(tls_out_.size()));
  // As in flush(): at once when the kernel takes it all, else the tail
  // through uv_write, behind any earlier queued write.
  const int wrote = try_write_nosignal(&socket_->h.stream, &buf, 1);
  if (wrote < 0 && wrote != UV_EAGAIN) return wrote;
  const std::size_t done = wrote > 0 ? static_cast<std::size_t>(wrote) : 0;
  if (done == tls_out_.size()) return 0;
  auto* w = new write_req;
  w->req.data = w;
  w->owned.assign(tls_out_, done);
  w->bufs.push_back(uv_buf_init(w->owned.data(), static_cast<unsigned int>(w->owned.size())));
  queued_write_started();
  const int rc = uv_write(&w->req, &socket_->h.stream, w->bufs.data(), 1, &on_write);
  if (rc != 0) {
    queued_write_finished();
    delete w;
  }
  return rc;
}

}  // namespace redsync::detail
