// Test support: one connection through tcp_proxy, a client socket paired
// with an upstream socket on the proxy's libuv loop. Each direction keeps an
// ordered queue of the chunks it read, each with the loop time it is due to
// be written, and one timer for the chunk at the front, so a delayed chunk
// never overtakes an earlier one. Loop thread only.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

namespace redsync::test::detail {

class proxy_connection;

/// What the proxy's connections share: the mode they obey, where new ones go,
/// the counters, and the set of live connections. Owned by the proxy.
struct proxy_shared {
  enum class mode { normal, delay, stall };

  uv_loop_t* loop = nullptr;
  mode current = mode::normal;
  std::chrono::milliseconds delay{0};
  std::chrono::milliseconds jitter{0};
  int target_port = 0;
  std::mt19937 random{std::random_device{}()};
  std::uint64_t accepted = 0;
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
  /// Every connection not yet freed, closing ones included.
  std::unordered_set<proxy_connection*> connections;
  /// Where reads land before they are copied into a chunk (one read at a time).
  std::vector<char> read_buffer = std::vector<char>(64 * 1024);
};

/// A client connection and its upstream. Frees itself once every handle is
/// closed, and leaves `proxy_shared::connections` then.
class proxy_connection {
 public:
  /// Accepts the listener's pending connection. With `refuse`, closes it at
  /// once (reset); otherwise connects upstream unless the mode is stall.
  static void accept(uv_stream_t* listener, proxy_shared& shared, bool refuse);

  /// Applies `proxy_shared::current`: stall stops reading and writing;
  /// normal and delay connect a held connection, write what is due (normal:
  /// everything queued) and read again.
  void apply_mode();
  /// Closes both sides, with a reset (RST) when asked and possible. Queued
  /// bytes are dropped. Idempotent.
  void close(bool reset);
  bool closing() const { return state_ == state::closing; }

 private:
  // Chunks read from `from`, written to `to` in order.
  struct direction {
    proxy_connection* owner = nullptr;
    uv_tcp_t* from = nullptr;
    uv_tcp_t* to = nullptr;
    std::uint64_t* forwarded = nullptr;  // the proxy's byte counter for this way
    struct chunk {
      std::string bytes;
      std::uint64_t due = 0;  // loop time (ms) at which it may be written
    };
    std::deque<chunk> queue{};
    std::size_t pending = 0;  // bytes queued or being written
    uv_timer_t timer{};
    uv_shutdown_t shutdown_req{};
    bool reading = false;
    bool eof = false;       // `from` sent EOF
    bool finished = false;  // everything before the EOF was written; `to` was shut down
  };
  struct write_op {
    uv_write_t req{};
    std::string bytes;
    direction* way = nullptr;
  };
  // held: accepted during a stall, upstream not contacted yet.
  enum class state { held, connecting, open, closing };

  explicit proxy_connection(proxy_shared& shared);
  void connect_upstream();
  void update_reading(direction& way);
  void pump(direction& way);
  void write(direction& way, std::string bytes);
  void finish_if_drained(direction& way);
  direction& other(direction& way) { return &way == &up_ ? down_ : up_; }

  static void on_connect(uv_connect_t* req, int status);
  static void on_alloc(uv_handle_t* handle, std::size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_timer(uv_timer_t* timer);
  static void on_write(uv_write_t* req, int status);
  static void on_shutdown(uv_shutdown_t* req, int status);
  static void on_handle_closed(uv_handle_t* handle);

  proxy_shared& shared_;
  state state_ = state::held;
  uv_tcp_t client_{};
  uv_tcp_t upstream_{};
  uv_connect_t connect_req_{};
  direction up_;    // client -> upstream
  direction down_;  // upstream -> client
  int handles_open_ = 0;
};

}  // namespace redsync::test::detail
