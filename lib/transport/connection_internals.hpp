#pragma once

// What connection.cpp, connection_connect.cpp and connection_commands.cpp
// share: the libuv objects a connection owns besides its timers, the
// invariants all three keep, and small helpers. Include only from them.

#include "transport/connection.hpp"
#include "transport/resp.hpp"
#include "transport/tls_session.hpp"

#include <uv.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
  // TLS nodes only: the session, and its decrypted bytes for the reader.
  std::unique_ptr<tls_session> tls;
  std::string plain;

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
  std::string owned;  // or owns them itself (TLS ciphertext)
};

struct connection::resolve_req {
  uv_getaddrinfo_t req{};
  connection* owner = nullptr;  // null once cancelled
};

inline std::string uv_error(int status) {
  return uv_strerror(status);
}

// The commands a new connection sends before any other, each with the name
// its failure is reported under: AUTH when there is a password, SELECT for a
// db other than 0, INFO when `config` has an on_server_info listener.
std::vector<std::pair<std::string, wire_command>> handshake_commands(const connection_config& config);

}  // namespace redsync::detail
