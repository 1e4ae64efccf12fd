// redsync on an application-owned libuv loop: no extra thread, every callback
// runs on the application's loop, inside its uv_run.
//
// The sequence: lock_async -> (work) -> unlock_async -> shut down. Shutting
// down on an external loop has one rule: destroy the Redsync *on the loop
// thread* (from a callback) and keep running the loop afterwards. The Redsync
// then closes its connections and handles in the background; uv_run returns
// once they are closed, and uv_loop_close succeeds (returns 0).
//
// (Destroying it from another thread also works, but then that thread blocks
// until the loop has run the close callbacks, so the loop must be running
// elsewhere meanwhile.)
//
//   build/examples/libuv_async [redis://127.0.0.1:7001 ...]
#include <redsync/redsync.hpp>

#include <fmt/core.h>
#include <uv.h>

#include <exception>
#include <memory>

#include "nodes.hpp"

using namespace std::chrono_literals;

namespace {

// Everything the callbacks need, owned by main.
struct app {
  uv_loop_t loop{};
  std::unique_ptr<redsync::Redsync> rs;
  std::unique_ptr<redsync::Mutex> mutex;
  uv_timer_t shutdown_timer{};  // defers shutdown out of the unlock callback
  int exit_code = 0;
};

// Destroys the Mutex, then the Redsync that made it. Runs from our own zero
// timer rather than inside a redsync callback: that callback is still on
// redsync's stack, and its operation should finish before we tear down the
// Redsync it belongs to.
void on_shutdown(uv_timer_t* timer) {
  auto* a = static_cast<app*>(timer->data);
  a->mutex.reset();
  a->rs.reset();  // on the loop thread: closes connections asynchronously
  uv_close(reinterpret_cast<uv_handle_t*>(timer), nullptr);
  fmt::print("redsync destroyed; the loop runs on until its handles are closed\n");
}

void shut_down(app& a, int exit_code) {
  a.exit_code = exit_code;
  uv_timer_start(&a.shutdown_timer, on_shutdown, 0, 0);
}

}  // namespace

constexpr std::string_view usage =
    "Usage: libuv_async [--help] [URI...]\n\n"
    "redsync on an application-owned libuv loop: lock_async, work, unlock_async,\nthen a clean shutdown of "
    "the loop.\n";

int main(int argc, char** argv) try {
  app a;
  uv_loop_init(&a.loop);
  uv_timer_init(&a.loop, &a.shutdown_timer);
  a.shutdown_timer.data = &a;

  // .loop: run on our loop instead of a thread owned by the Redsync.
  a.rs = std::make_unique<redsync::Redsync>(examples::node_uris(argc, argv, usage),
                                            redsync::redsync_options{.loop = &a.loop});
  a.mutex =
      std::make_unique<redsync::Mutex>(a.rs->new_mutex("example:libuv_async", {.expiry = 5s, .tries = 25}));

  // Callbacks run exactly once, on our loop, never inside the starting call:
  // nothing happens until uv_run below.
  a.mutex->lock_async(redsync::context::timeout(5s), [&a](redsync::result r) {
    if (!r) {
      fmt::print(stderr, "lock failed: {}\n", r.describe());
      if (examples::nodes_unreachable(r)) fmt::print(stderr, "({})\n", examples::unreachable_hint);
      return shut_down(a, 1);
    }
    fmt::print("locked {} on the application's loop (token {}, {} attempt(s))\n", a.mutex->name(),
               a.mutex->token().value, r.attempts);
    // ... asynchronous work under the lock would be started here ...
    a.mutex->unlock_async(redsync::context::timeout(2s), [&a](redsync::result u) {
      if (!u) {
        fmt::print(stderr, "unlock failed: {}\n", u.describe());
        return shut_down(a, 1);
      }
      fmt::print("unlocked\n");
      shut_down(a, 0);
    });
  });

  fmt::print("running the loop\n");
  uv_run(&a.loop, UV_RUN_DEFAULT);  // returns once every handle is closed
  const int rc = uv_loop_close(&a.loop);
  fmt::print("uv_run returned; uv_loop_close -> {}{}\n", rc, rc == 0 ? " (clean)" : "");
  return rc == 0 ? a.exit_code : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
