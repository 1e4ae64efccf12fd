#pragma once

// One pipelined connection to a Redis node over libuv (TCP or unix socket).
// Loop thread only. Owned by a node_pool, which decides when to connect
// (backoff lives there); this class moves bytes, matches replies to commands
// in FIFO order and enforces per-command deadlines.
//
// Lifecycle: disconnected -> connecting -> connected -> (drop) disconnected
// -> ... ; close() from any state ends in `closed` once every handle it owns
// has been closed. Dropped sockets free themselves from their close callback.
//
// Implemented in connection.cpp (lifecycle: construction, drop, close),
// connection_connect.cpp (connecting and the handshake),
// connection_commands.cpp (writes, reply matching, deadlines) and
// connection_tls.cpp (the TLS handshake and records, over tls_session).

#include "transport/node_pool.hpp"

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

class tls_context;
class write_list;

struct connection_config {
  node_options node;
  std::chrono::milliseconds connect_timeout{1000};
  // Set for a TLS node (node.tls.enabled): its SSL_CTX, shared by every
  // connection to the node. The TLS handshake runs right after the TCP
  // connect, within connect_timeout, and before AUTH/SELECT/INFO.
  std::shared_ptr<const tls_context> tls{};
  // When set, every new connection also sends `INFO` in its
  // handshake and hands the reply here (an error reply too, e.g. NOPERM),
  // before any later reply on that connection is delivered (node_trust reads
  // the server's run_id).
  std::function<void(const reply& info)> on_server_info{};
};

class connection {
 public:
  enum class state { disconnected, connecting, connected, closing, closed };
  using clock = std::chrono::steady_clock;
  // Told the outcome of every connect attempt (nullptr = connected, else the
  // failure text), before the callbacks of the commands it fails run.
  using connect_listener = std::function<void(const std::string* error)>;

  connection(uv_loop_t* loop, const connection_config& config, connect_listener listener);
  ~connection();  // requires state() == closed (or that close() was never needed)
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  state current_state() const noexcept { return state_; }

  // Pub/sub: when set, "message" and "smessage" pushes (which answer no
  // command) go here instead of being matched to a command, and so does
  // every "sunsubscribe": a cluster node sends one unasked when a slot
  // leaves it, which cannot be told from the reply to a SUNSUBSCRIBE, so a
  // SUNSUBSCRIBE must be sent with a command behind it that answers (PING)
  // in the same wire_command. (S)SUBSCRIBE confirmations still answer their
  // commands in order. Set before connect().
  using push_handler = std::function<void(reply&&)>;
  void set_push_handler(push_handler handler) { push_ = std::move(handler); }

  // Told when a connected socket is dropped (the server closed it, a write
  // or read failed, it stalled), with the reason, before the callbacks of
  // the commands it fails run. Not for failed connect attempts (those go to
  // the connect_listener) nor for close().
  using drop_listener = std::function<void(const std::string& error)>;
  void set_drop_listener(drop_listener listener) { on_drop_ = std::move(listener); }

  // Starts a connect attempt; only when disconnected. Never completes inline.
  void connect();
  // Queues a command (or `replies` commands back to back, answered as one:
  // see node_pool::send); requires connecting or connected. Written on the
  // next loop iteration together with everything else queued by then.
  void send(wire_command cmd, std::chrono::microseconds timeout, command_callback done,
            std::uint32_t replies = 1);
  // Moves the callbacks of every command still awaiting an outcome into
  // `orphans` (the caller completes them), closes all handles, then calls
  // `closed`.
  void close(std::vector<command_callback>& orphans, std::function<void()> closed);

  // Writes now what was queued since the last write, if this connection is
  // on its loop's write_list (which calls this).
  void write_if_listed();

  // Without any byte from the server for this long while commands are
  // outstanding, the connection is considered dead and dropped.
  std::chrono::milliseconds stall_close() const noexcept;

 private:
  struct socket;
  struct write_req;
  struct resolve_req;
  struct entry {
    command_callback done;  // empty once timed out ("abandoned")
    wire_command wire;      // only until written
    clock::time_point sent_at;
    clock::time_point deadline;
    std::uint32_t replies_due = 1;  // replies still to read for this entry
    std::string first_error;        // of an entry with several replies, the first error's text
  };

  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res);
  static void on_connected(uv_connect_t* req, int status);
  static void on_connect_timer(uv_timer_t* timer);
  static void on_deadline_timer(uv_timer_t* timer);
  static void on_flush(uv_idle_t* idle);
  static void on_alloc(uv_handle_t* handle, std::size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_write(uv_write_t* req, int status);
  static void on_socket_closed(uv_handle_t* handle);
  static void on_own_handle_closed(uv_handle_t* handle);

  void try_next_address();
  void connect_failed(std::string error);
  void start_tls();
  void continue_tls_handshake();
  void handle_tls_data(const char* data, std::size_t size);
  void deliver_tls_plaintext();
  void flush_tls();
  // Writes the TLS session's pending ciphertext; 0 or a libuv error.
  int send_tls_output();
  void tls_write_failed(int status);
  void handshake_and_flush();
  void flush();
  void handle_data(const char* data, std::size_t size);
  void drop(const std::string& error);
  void detach_socket();
  void handle_closed();
  void arm_deadline_timer();
  void expire(clock::time_point now);
  bool has_outstanding() const noexcept { return !inflight_.empty() || !unsent_.empty(); }
  // Takes this connection off its loop's write_list (it was written,
  // dropped or closed).
  void unlist_writer();

  uv_loop_t* loop_;
  connection_config config_;
  connect_listener listener_;
  push_handler push_;
  drop_listener on_drop_;
  state state_ = state::disconnected;

  uv_timer_t connect_timer_{};
  uv_timer_t deadline_timer_{};
  uv_idle_t flush_idle_{};
  bool write_listed_ = false;           // on writes_ (and flush_idle_ started)
  std::shared_ptr<write_list> writes_;  // its loop's, or null (the idle handle alone writes)
  int own_handles_open_ = 0;
  std::function<void()> closed_;

  socket* socket_ = nullptr;
  resolve_req* resolving_ = nullptr;
  std::vector<sockaddr_storage> addresses_;
  std::size_t next_address_ = 0;
  std::string last_connect_error_;
  std::string pending_connect_error_;  // set when connect failed synchronously

  // Handshake (AUTH, SELECT) encoded once; the names of the handshake
  // commands whose replies are still due precede every user reply.
  std::vector<std::pair<std::string, wire_command>> handshake_;
  std::deque<std::string> handshake_due_;
  std::string handshake_error_;
  bool handshake_unsent_ = false;

  std::deque<entry> inflight_;  // written, replies due in this order
  std::deque<entry> unsent_;    // queued, not yet written
  // Scratch for flush(), kept to reuse their capacity.
  std::vector<uv_buf_t> write_bufs_;
  std::vector<wire_command> write_wires_;
  std::string tls_plain_;  // flush_tls(): the batch's plaintext, before encryption
  std::string tls_out_;    // send_tls_output(): ciphertext to write
  // Set when a write to a connected TLS socket failed: writing stops, and the
  // read side drops the connection, with the server's alert if one is there.
  std::string tls_write_error_;
  clock::time_point armed_for_ = clock::time_point::max();
  clock::time_point stall_since_{};
  std::chrono::microseconds max_timeout_{0};
};

// Closes every connection in `conns` (null ones skipped), completing what
// each still awaits with `shutdown`, then calls `closed` (at once when there
// is none).
void close_all(const std::vector<connection*>& conns, std::function<void()> closed);

}  // namespace redsync::detail
