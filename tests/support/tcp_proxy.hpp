// Test support: a TCP proxy for fault injection. It listens on 127.0.0.1 and
// forwards each connection to 127.0.0.1:target, both ways, in order, and can
// delay, stall, drop or refuse connections and switch its target, while
// tests (or the chaos suite's chaos_proxy program) drive real redis-servers
// through it. It runs on its own libuv loop thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace redsync::test {

/// What a tcp_proxy has done since it started.
struct proxy_stats {
  /// Connections accepted, refused ones included.
  std::uint64_t accepted = 0;
  /// Bytes forwarded from clients to the upstream.
  std::uint64_t bytes_up = 0;
  /// Bytes forwarded from the upstream to clients.
  std::uint64_t bytes_down = 0;
  /// Connections open now (accepted and not yet closed).
  std::size_t open = 0;
};

/// A proxy from 127.0.0.1:port() to 127.0.0.1:target_port.
///
/// The mode (normal, delay or stall) applies to every connection, current and
/// new, from the moment it is set; refuse() and retarget() affect new
/// connections only. A side that closes (EOF) is passed on as a half-close
/// once what it sent has been forwarded, and the connection is gone when both
/// sides have closed; when one side resets, or a write to it fails, both are
/// reset at once; a client whose upstream cannot be reached is closed.
///
/// Every member function may be called from any thread; each call returns
/// once the proxy's loop has applied it. Never call one from a callback that
/// runs on the proxy's loop (there are none in this interface).
class tcp_proxy {
 public:
  /// Listens on 127.0.0.1:listen_port (0 = a free port) and starts the loop
  /// thread. Throws std::invalid_argument for a port out of range and
  /// std::runtime_error when the port cannot be listened on.
  explicit tcp_proxy(int target_port, int listen_port = 0);
  /// Closes every connection and the listener, then joins the loop thread.
  ~tcp_proxy();
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  /// The port it listens on.
  int port() const noexcept;

  /// Forwards at once; bytes held by a delay or a stall are written now, in order.
  void normal();
  /// Forwards each chunk read, either way, `delay` plus a uniformly random
  /// [0, jitter] after it was read, never before an earlier chunk of the same
  /// direction. Throws std::invalid_argument for a negative duration.
  void delay(std::chrono::milliseconds delay,
             std::chrono::milliseconds jitter = std::chrono::milliseconds(0));
  /// Stops reading from both sides of every connection (TCP backpressure
  /// builds) and holds what is queued; connections stay open. New
  /// connections are accepted and held without contacting the upstream.
  /// normal() or delay() resumes everything in order.
  void stall();
  /// Closes every current connection on both sides at once, with a reset
  /// (RST) where possible. Queued bytes are dropped; the mode is unchanged.
  void drop_connections();
  /// While on, new connections are accepted and reset at once.
  void refuse(bool on);
  /// New connections go to 127.0.0.1:target_port; current ones stay where
  /// they are. Throws std::invalid_argument for a port out of range.
  void retarget(int target_port);

  /// The counters and the number of open connections.
  proxy_stats stats() const;

 private:
  struct impl;
  // Runs fn on the loop thread and waits for it.
  void run_on_loop(const std::function<void()>& fn) const;

  std::unique_ptr<impl> impl_;
};

}  // namespace redsync::test
