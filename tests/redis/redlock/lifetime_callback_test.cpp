// Lifetimes, continued: a Redsync whose last reference is dropped inside one
// of its own callbacks, on its own loop thread or on an application-owned
// loop's (issue 21 §3). Run under ASan and TSan: nothing may touch the
// engine after it is gone, and the loop thread must end and be joined.

#include "drop_at_shutdown.hpp"
#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <uv.h>

#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

// Whether the thread `tid` of this process still runs, as the kernel sees
// it: a thread that returned is gone even before it is joined.
bool thread_alive(pid_t tid) {
  return ::access(("/proc/self/task/" + std::to_string(tid)).c_str(), F_OK) == 0;
}

// What the application keeps, owned only by the callback below: the Mutexes
// are declared after the Redsync, so they go first (a Mutex must not
// outlive its Redsync).
struct app_state {
  std::shared_ptr<redsync::Redsync> rs;
  std::optional<redsync::Mutex> holder;   // holds `name` when the Redsync goes
  std::optional<redsync::Mutex> waiter;   // waits for `name` meanwhile
  std::optional<redsync::Mutex> trigger;  // its callback drops the last reference
};

struct outcome {
  redsync::result trigger;  // what the callback that dropped the Redsync got
  redsync::result waiter;   // the call in flight when the Redsync went
  pid_t loop_tid = 0;       // the thread the callback ran on
};

// Builds the state, starts a waiter that cannot finish, and drops the last
// reference to the Redsync in the trigger's callback: inside its body
// (`reset_in_body`), or as the callback object is destroyed after it ran
// (a shared_ptr captured by value, the pattern of the issue).
// `made` runs once the Redsync is made (an application-owned loop is started
// there: making a Redsync on a loop another thread already runs is not safe).
outcome drop_in_callback(cluster& c, const std::string& name, redsync::redsync_options options,
                         bool reset_in_body, const std::function<void()>& made = {}) {
  auto app = std::make_shared<app_state>();
  app->rs = std::make_shared<redsync::Redsync>(c.uris(), fresh_nodes(std::move(options)));
  if (made) made();
  app->holder.emplace(app->rs->new_mutex(name, {.expiry = 30s}));
  REQUIRE(app->holder->lock(redsync::context::timeout(5s)).ok());
  app->waiter.emplace(app->rs->new_mutex(name, {.expiry = 30s, .tries = 100000}));
  auto waiter_done = std::make_shared<std::promise<redsync::result>>();
  app->waiter->lock_async(redsync::context{},
                          [waiter_done](redsync::result r) { waiter_done->set_value(std::move(r)); });
  app->trigger.emplace(app->rs->new_mutex(unique_name("drop-trigger")));

  auto trigger_done = std::make_shared<std::promise<redsync::result>>();
  auto loop_tid = std::make_shared<std::atomic<pid_t>>(0);
  redsync::Mutex& trigger = *app->trigger;
  // The callback holds the only reference from here on.
  trigger.try_lock_async(redsync::context::timeout(5s), [app = std::move(app), trigger_done, loop_tid,
                                                         reset_in_body](redsync::result r) mutable {
    loop_tid->store(::gettid());
    if (reset_in_body) app.reset();  // ~Mutex x3, then ~Redsync, right here
    trigger_done->set_value(std::move(r));
  });
  outcome out;
  auto tf = trigger_done->get_future();
  REQUIRE(tf.wait_for(10s) == std::future_status::ready);
  out.trigger = tf.get();
  auto wf = waiter_done->get_future();
  REQUIRE(wf.wait_for(10s) == std::future_status::ready);
  out.waiter = wf.get();
  out.loop_tid = loop_tid->load();
  return out;
}

}  // namespace

TEST_SUITE("lifetime") {
  TEST_CASE(
      "a Redsync whose last reference goes in its own callback, on its own loop thread, shuts down: "
      "calls in flight end as shutting_down, releases go out, the loop thread ends") {
    cluster c(3);
    for (const bool reset_in_body : {false, true}) {
      CAPTURE(reset_in_body);
      const auto name = unique_name("drop-own-loop");
      const auto out = drop_in_callback(c, name, {}, reset_in_body);
      CHECK_MESSAGE(out.trigger.ok(), out.trigger.describe());
      CHECK(out.waiter.error == redsync::errc::shutting_down);
      // The holder's background release was posted before the Redsync went,
      // so it runs first and is awaited; the waiter's abandoned attempt is
      // released too (a key reserved for it expires with its claim window).
      for (std::size_t i = 0; i < c.size(); ++i)
        CHECK_MESSAGE(wait_until([&] { return !redis_client(c[i]).exists(name); }, 5s), "node ", i);
      // The loop thread closed its loop and returned (it is joined later,
      // by the next Redsync made or at exit).
      REQUIRE(out.loop_tid != 0);
      CHECK(out.loop_tid != ::gettid());
      CHECK(wait_until([&] { return !thread_alive(out.loop_tid); }, 5s));
    }
    // A new Redsync after that works, and joins the finished thread.
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("drop-own-loop-after"));
    CHECK(m.lock(redsync::context::timeout(5s)).ok());
  }

  TEST_CASE(
      "a Redsync whose last reference goes in its own callback, on an application-owned loop, shuts down "
      "and the loop closes cleanly") {
    cluster c(3);
    for (const bool reset_in_body : {false, true}) {
      CAPTURE(reset_in_body);
      uv_loop_t loop;
      REQUIRE(uv_loop_init(&loop) == 0);
      uv_async_t stop;
      uv_async_init(&loop, &stop,
                    [](uv_async_t* h) { uv_close(reinterpret_cast<uv_handle_t*>(h), nullptr); });
      std::thread runner;

      const auto name = unique_name("drop-app-loop");
      const auto out = drop_in_callback(c, name, {.loop = &loop}, reset_in_body, [&] {
        runner = std::thread([&] { uv_run(&loop, UV_RUN_DEFAULT); });
      });
      CHECK_MESSAGE(out.trigger.ok(), out.trigger.describe());
      CHECK(out.waiter.error == redsync::errc::shutting_down);
      for (std::size_t i = 0; i < c.size(); ++i)
        CHECK_MESSAGE(wait_until([&] { return !redis_client(c[i]).exists(name); }, 5s), "node ", i);

      // uv_run returns once the pools have drained and every handle closed.
      uv_async_send(&stop);
      runner.join();
      CHECK(uv_loop_close(&loop) == 0);
    }
  }
  TEST_CASE(
      "a Mutex destroyed in its lock callback while its Redsync shuts down on another thread is released") {
    cluster c(3);
    const auto name = unique_name("drop-mutex-at-shutdown");
    drop_at_shutdown drop;
    // Declared before the Redsync, so that only the callback destroys it.
    std::unique_ptr<redsync::Mutex> m;
    {
      redsync::Redsync rs(c.uris(), fresh_nodes());
      m = std::make_unique<redsync::Mutex>(rs.new_mutex(name, {.expiry = 60s, .tries = 1}));
      m->try_lock_async({}, [&](redsync::result r) {
        drop.report_then_wait(r.ok());
        // The Redsync is being destroyed on the test's thread (its shutdown
        // task is queued behind this callback) when the application lets go
        // of the held Mutex.
        m.reset();
      });
      REQUIRE(drop.reported());
      drop.destroying();
    }  // rs: ~engine marks shutting_down, queues its shutdown, waits for the loop
    // Released before the Redsync was gone, not left for its 60 s expiry.
    for (std::size_t i = 0; i < c.size(); ++i) CHECK_MESSAGE(!redis_client(c[i]).exists(name), "node ", i);
  }
}  // TEST_SUITE
