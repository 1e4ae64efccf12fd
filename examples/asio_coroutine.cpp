// C++20 coroutines on Asio: three workers on one io_context thread take
// turns on a lock with `co_await` (redsync/asio.hpp), and a fourth gives up
// waiting after a timeout, through Asio's cancellation (awaitable_operators):
// its acquisition is abandoned and undone on every node.
//
// Built when standalone Asio is found (Debian: libasio-dev).
//
//   build/examples/asio_coroutine [redis://127.0.0.1:7001 ...]
#include <redsync/asio.hpp>
#include <redsync/redsync.hpp>

#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>

#include <fmt/core.h>

#include <exception>
#include <string>

#include "nodes.hpp"

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

int failures = 0;

// Locks, works for 100 ms (a timer: the thread serves the other workers
// meanwhile), unlocks. Every step completes on this coroutine's executor.
asio::awaitable<void> worker(redsync::Redsync& rs, std::string who) {
  auto m = rs.new_mutex("example:asio", {.tries = redsync::unlimited_tries});
  auto r = co_await redsync::async_lock(m, redsync::context::timeout(10s), asio::use_awaitable);
  if (!r) {
    fmt::print(stderr, "{}: lock failed: {}\n", who, r.describe());
    if (examples::nodes_unreachable(r)) fmt::print(stderr, "({})\n", examples::unreachable_hint);
    ++failures;
    co_return;
  }
  fmt::print("{}: holds the lock, fencing token {}\n", who, m.token().value);
  asio::steady_timer work(co_await asio::this_coro::executor, 100ms);
  co_await work.async_wait(asio::use_awaitable);
  auto u = co_await redsync::async_unlock(m, {}, asio::use_awaitable);
  fmt::print("{}: released ({})\n", who, u.ok() ? "ok" : u.describe());
}

// Waits at most 50 ms: when the timer wins, the lock's cancellation slot is
// triggered and the acquisition is abandoned (nothing is left on the nodes).
asio::awaitable<void> impatient(redsync::Redsync& rs) {
  auto m = rs.new_mutex("example:asio", {.tries = redsync::unlimited_tries});
  asio::steady_timer patience(co_await asio::this_coro::executor, 50ms);
  auto first =
      co_await (redsync::async_lock(m, {}, asio::use_awaitable) || patience.async_wait(asio::use_awaitable));
  if (first.index() == 1) {
    fmt::print("impatient: gave up after 50 ms; holds the lock: {}\n", m.held());
  } else {
    fmt::print("impatient: got the lock first\n");
    co_await redsync::async_unlock(m, {}, asio::use_awaitable);
  }
}

}  // namespace

constexpr std::string_view usage =
    "Usage: asio_coroutine [--help] [URI...]\n\n"
    "Three coroutines on one io_context thread take turns on a lock with\n"
    "co_await redsync::async_lock(..., asio::use_awaitable); a fourth gives up\n"
    "after 50 ms through Asio's cancellation, which abandons its acquisition.\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));
  asio::io_context io;
  for (const char* who : {"worker A", "worker B", "worker C"})
    asio::co_spawn(io, worker(rs, who), asio::detached);
  asio::co_spawn(io, impatient(rs), asio::detached);
  // Returns once every coroutine is done: each call in flight counts as work.
  io.run();
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
