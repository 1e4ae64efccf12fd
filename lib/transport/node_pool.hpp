#pragma once

// One Redis master: a small pool of pipelined connections over libuv.
// Loop thread only (except construction/address()).
//
// Contract (libuv style): send() never calls its callback synchronously; the
// callback runs exactly once on the loop thread: with the reply, with a
// timeout, with a connection failure, or with `shutdown` from close().
//
// Ordering: commands given the same `route` go on the same connection, so the
// server executes them in send order. The Redlock flows rely on this: a
// release sent after a timed-out SET is executed after that SET, even on a
// node that was SIGSTOPped and resumed later.
//
// A timed-out command does not close its connection: its late reply is read
// and dropped in order. A connection that has had no reply at all for
// `stall_close` while commands are outstanding is closed and reconnected on
// next use. A dropped connection is re-established on next use, with
// exponential backoff between failed connects; during backoff send() fails
// fast (deferred callback, `unreachable`).
//
// Details the layers above may rely on:
//  * route % pool_size picks the connection; connections are created and
//    connected lazily on first use, on the loop thread.
//  * A command's timeout runs from send(); the handshake (AUTH, SELECT) is
//    pipelined in front of the first commands of each new connection and is
//    bounded by their timeouts. A command that times out before it was
//    written is never sent at all.
//  * stall_close = max(10 x the largest timeout seen on that connection, 5 s).
//    Commands still waiting when it fires fail as `unreachable`.
//  * Backoff is per node: after a failed connect (refused, timed out,
//    resolve error) every disconnected connection of the pool fails fast for
//    reconnect_backoff_min, doubling per consecutive failure up to
//    reconnect_backoff_max; a successful connect resets it. A connection
//    dropped after it was up reconnects on next use without waiting.
//  * If AUTH or SELECT failed, the commands' own error replies (e.g. NOAUTH)
//    are delivered with status `ok`, and `error` says why, e.g.
//    "AUTH failed: WRONGPASS invalid username-password pair ...".
//  * Callbacks must not throw (std::terminate): they run inside libuv.
//  * close(): callbacks of everything outstanding run with `shutdown` after
//    close() returned, then `closed` runs last; sends made while closing also
//    complete with `shutdown`. The pool may be destroyed inside `closed`.
//    send() after `closed` ran throws std::logic_error (programmer error).

#include "transport/reply.hpp"

#include <redsync/options.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct uv_loop_s;

namespace redsync::detail {

enum class transport_status {
  ok,           // `value` holds the reply (which may be an error reply)
  timeout,      // no reply within the timeout
  unreachable,  // connect failed/timed out, in backoff, or connection dropped
  shutdown,     // the pool was closed
};

struct command_result {
  transport_status status = transport_status::ok;
  reply value;
  // Transport failure text, e.g. "connect: connection refused"; with status
  // ok, non-empty only when a handshake error explains an error reply.
  std::string error;
  std::chrono::microseconds latency{0};
  // From a cluster member (cluster_router): host:port of the master whose
  // connection gave this result, after every redirection (empty when no
  // master was asked). Empty from a standalone pool.
  std::string served_by;
};

using command_callback = std::function<void(command_result&&)>;

// Runs a user callback from a libuv callback, where there is no caller to
// throw to: noexcept turns a throw into std::terminate.
inline void complete(command_callback& done, command_result&& result) noexcept {
  done(std::move(result));
}

// What a pool reports about its node, for observability. The pool itself
// reports its connections' state; the layers above report through note()
// what they had to send again to this node (a script it did not know).
enum class pool_event {
  connected,        // the first connection to the node came up
  unreachable,      // a connect failed while the node was up (or before it ever was)
  reconnected,      // a connection came up after the node was unreachable, or after a drop
  script_loaded,    // a script sent by its SHA1 was unknown, so its source was sent (EVAL)
  function_loaded,  // a function was not found, so its library was loaded (FUNCTION LOAD)
};
// detail: the connect error, or the script's SHA1; sent_at: when the command
// that found the script missing was sent (time_point{} for connection events).
using pool_listener =
    std::function<void(pool_event e, std::string_view detail, std::chrono::steady_clock::time_point sent_at)>;

// A command already encoded as RESP (shared so one encoding can be sent to
// all N nodes without copies).
using wire_command = std::shared_ptr<const std::string>;

// Encodes argv as a RESP multi-bulk command.
wire_command encode_command(const std::vector<std::string_view>& argv);
// Appends argv, encoded as encode_command does, to `out` (to build several
// commands sent as one, see node_pool::send).
void append_command(std::string& out, const std::vector<std::string_view>& argv);

class tls_context;

class node_pool {
 public:
  // For a TLS node (node.tls.enabled), reads the CA, certificate and key
  // files here, on the calling thread: throws config_error naming the field
  // and the path when one cannot be used.
  node_pool(uv_loop_s* loop, node_options node, const redsync_options& options);
  ~node_pool();  // requires close() to have completed
  node_pool(const node_pool&) = delete;
  node_pool& operator=(const node_pool&) = delete;

  const std::string& address() const noexcept { return address_; }
  // The node's TLS context (null for plain TCP), for other connections to
  // the same node (the wake-up listener's).
  std::shared_ptr<const tls_context> tls() const;

  // Every connection made from now on sends `INFO` in its handshake
  // and passes the reply (an error reply too) here, on the loop thread,
  // before any other reply on it.
  void on_server_info(std::function<void(const reply& info)> listener);

  // Before the first send: `listener` hears the node's events on the loop
  // thread (possibly inside send(), when a connect fails at once).
  void on_event(pool_listener listener);
  // Loop thread: reports `e` through the listener (for the layers above).
  void note(pool_event e, std::string_view detail, std::chrono::steady_clock::time_point sent_at) const;

  // Sends `cmd` on the connection chosen by `route` (e.g. a hash of the lock
  // name); `done` runs once with the outcome, at the latest `timeout` after
  // this call. `cmd` may hold several commands written back to back (a
  // MULTI ... EXEC transaction) when `replies` says how many: `done` then
  // gets the last reply, or the first error reply among them if one was an
  // error (so a refused MULTI is not hidden behind EXEC's complaint).
  void send(std::uint64_t route, wire_command cmd, std::chrono::microseconds timeout, command_callback done,
            std::uint32_t replies = 1);

  // Fails everything outstanding with `shutdown`, closes all handles, then
  // calls `closed` (on the loop thread).
  void close(std::function<void()> closed);

 private:
  struct impl;
  std::string address_;
  std::unique_ptr<impl> impl_;
};

}  // namespace redsync::detail
