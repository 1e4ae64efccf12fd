// <redsync/asio.hpp> against real nodes: coroutines, deferred operations and
// bound callbacks complete on the caller's executor (never the library's
// loop thread), keep its io_context running while in flight, and a
// cancellation through Asio's slots abandons an acquisition without leaving
// anything on the nodes. Built only when Asio is found (../meson.build).

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include "redlock/key_inspection.hpp"

#include <redsync/asio.hpp>
#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/experimental/deferred.hpp>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <variant>

using namespace std::chrono_literals;
using redsync::test::cluster;
using redsync::test::fresh_nodes;
using redsync::test::permits_on;
using redsync::test::redis_client;
using redsync::test::unique_name;
using redsync::test::wait_until;

namespace {

// The thread that runs the library's loop: where a plain `*_async` callback runs.
std::thread::id asio_test_loop_thread(redsync::Redsync& rs) {
  auto probe = rs.new_mutex(unique_name("asio-loop-probe"));
  std::promise<std::thread::id> id;
  probe.valid_async({}, [&](redsync::result) { id.set_value(std::this_thread::get_id()); });
  return id.get_future().get();
}

// True when no key of lock `name` is left on the node: the lock key, its
// waiting line and the line's leases (lib/redlock/scripts/scripts.hpp).
bool asio_test_no_keys(const redsync::test::redis_server& node, const std::string& name) {
  redis_client c(node);
  return !c.exists(name) && !c.exists(name + ":redsync-line") && !c.exists(name + ":redsync-leases");
}

}  // namespace

TEST_SUITE("asio") {
  TEST_CASE("a coroutine locks and unlocks with use_awaitable, resuming on its io_context's thread") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto loop_thread = asio_test_loop_thread(rs);
    const auto name = unique_name("asio-coroutine");
    auto m = rs.new_mutex(name);
    asio::io_context io;
    std::optional<redsync::result> locked, unlocked;
    bool on_io_thread = true;
    bool finished = false;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          locked = co_await redsync::async_lock(m, redsync::context::timeout(5s), asio::use_awaitable);
          on_io_thread = on_io_thread && std::this_thread::get_id() != loop_thread;
          CHECK(m.held());
          for (std::size_t i = 0; i < c.size(); ++i) CHECK(redis_client(c[i]).get(name) == m.value());
          unlocked = co_await redsync::async_unlock(m, {}, asio::use_awaitable);
          on_io_thread = on_io_thread && std::this_thread::get_id() != loop_thread;
          finished = true;
        },
        asio::detached);
    const auto io_thread = std::this_thread::get_id();
    // run() returns only once the coroutine is done: each call in flight is
    // outstanding work on the coroutine's executor.
    io.run();
    CHECK(io_thread != loop_thread);
    CHECK(on_io_thread);
    REQUIRE(finished);
    REQUIRE(locked);
    CHECK_MESSAGE(locked->ok(), locked->describe());
    REQUIRE(unlocked);
    CHECK_MESSAGE(unlocked->ok(), unlocked->describe());
    for (std::size_t i = 0; i < c.size(); ++i) CHECK(asio_test_no_keys(c[i], name));
  }

  // Was a hole (attack review of reentrancy, F1): a re-entry was counted for
  // the thread that started the call, so a second coroutine on the same
  // io_context "re-entered" the first one's lock, and both ran inside it
  // with the same fencing token. Only a blocking call re-enters now.
  TEST_CASE("two coroutines on one thread do not share a reentrant mutex: the second is refused") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("asio-reentrant");
    auto m = rs.new_mutex(name, {.reentrant = true});
    asio::io_context io;
    std::optional<redsync::result> first, second, first_unlock;
    asio::steady_timer hold(io, 5s);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          first = co_await redsync::async_lock(m, redsync::context::timeout(5s), asio::use_awaitable);
          asio::error_code cancelled;  // the second coroutine ends the wait
          co_await hold.async_wait(asio::redirect_error(asio::use_awaitable, cancelled));
          first_unlock = co_await redsync::async_unlock(m, {}, asio::use_awaitable);
        },
        asio::detached);
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          while (!first) {  // after the first holds the lock
            asio::steady_timer tick(io, 10ms);
            co_await tick.async_wait(asio::use_awaitable);
          }
          second = co_await redsync::async_lock(m, redsync::context::timeout(5s), asio::use_awaitable);
          hold.cancel();
        },
        asio::detached);
    io.run();
    REQUIRE(first);
    CHECK_MESSAGE(first->ok(), first->describe());
    REQUIRE(second);
    CHECK_MESSAGE(second->error == redsync::errc::already_held, second->describe());
    REQUIRE(first_unlock);
    CHECK_MESSAGE(first_unlock->ok(), first_unlock->describe());  // one hold: this unlock released it
    for (std::size_t i = 0; i < c.size(); ++i) CHECK(asio_test_no_keys(c[i], name));
  }

  TEST_CASE(
      "deferred, bound callback and use_future tokens complete on the strand's thread, never the loop's") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto loop_thread = asio_test_loop_thread(rs);
    auto m = rs.new_mutex(unique_name("asio-tokens"));
    asio::io_context io;
    auto strand = asio::make_strand(io);
    auto keep_running = asio::make_work_guard(io);
    std::thread io_thread([&] { io.run(); });

    // deferred: nothing is sent until the operation is launched, here with a
    // callback bound to the strand.
    auto deferred_lock = redsync::async_try_lock(m, {}, asio::experimental::deferred);
    CHECK_FALSE(m.held());
    std::promise<std::pair<redsync::result, bool>> locked;
    std::move(deferred_lock)(asio::bind_executor(strand, [&](redsync::result r) {
      CHECK(std::this_thread::get_id() == io_thread.get_id());
      locked.set_value({std::move(r), strand.running_in_this_thread()});
    }));
    auto [lock_result, in_strand] = locked.get_future().get();
    CHECK_MESSAGE(lock_result.ok(), lock_result.describe());
    CHECK(in_strand);

    // use_future: the future's own executor (no user code runs there).
    auto valid = redsync::async_valid(m, {}, asio::use_future).get();
    CHECK_MESSAGE(valid.ok(), valid.describe());

    std::promise<std::thread::id> unlocked_on;
    std::promise<redsync::result> unlocked;
    redsync::async_unlock(m, {}, asio::bind_executor(strand, [&](redsync::result r) {
                            unlocked_on.set_value(std::this_thread::get_id());
                            unlocked.set_value(std::move(r));
                          }));
    const auto unlock_thread = unlocked_on.get_future().get();
    CHECK(unlock_thread == io_thread.get_id());
    CHECK(unlock_thread != loop_thread);
    CHECK(unlocked.get_future().get().ok());
    keep_running.reset();
    io_thread.join();
  }

  TEST_CASE(
      "a cancellation mid-acquire reports cancelled, leaves no key and the lock goes to the next client") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("asio-cancel");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    // Waits without a limit of tries, a second between them: only the
    // cancellation can end it.
    auto waiter = rs.new_mutex(name, {.tries = redsync::unlimited_tries, .retry_delay = 1s});
    asio::io_context io;
    asio::cancellation_signal cancel;
    asio::steady_timer soon(io, 300ms);
    soon.async_wait([&](std::error_code) { cancel.emit(asio::cancellation_type::total); });
    std::optional<redsync::result> outcome;
    bool slot_cleared_first = false;
    const auto start = std::chrono::steady_clock::now();
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          outcome = co_await redsync::async_lock(
              waiter, {}, asio::bind_cancellation_slot(cancel.slot(), asio::use_awaitable));
          slot_cleared_first = !cancel.slot().has_handler();
        },
        asio::detached);
    io.run();
    const auto took = std::chrono::steady_clock::now() - start;
    REQUIRE(outcome);
    CHECK_MESSAGE(outcome->is(redsync::errc::cancelled), outcome->describe());
    CHECK(slot_cleared_first);
    CHECK(took < 3s);
    CHECK_FALSE(waiter.held());
    // The waiter left the line on every node; the holder's keys are untouched.
    for (std::size_t i = 0; i < c.size(); ++i) {
      CAPTURE(i);
      CHECK(redis_client(c[i]).get(name) == holder.value());
      CHECK(wait_until([&] { return !redis_client(c[i]).exists(name + ":redsync-line"); }, 5s));
    }
    REQUIRE(holder.unlock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) CHECK(asio_test_no_keys(c[i], name));
    // Not reserved for a ghost waiter: a newcomer's single attempt wins.
    auto next = rs.new_mutex(name);
    auto r = next.try_lock(redsync::context{});
    CHECK_MESSAGE(r.ok(), r.describe());
    CHECK(next.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a lock raced against a timer with awaitable_operators loses cleanly when the timer wins") {
    using namespace asio::experimental::awaitable_operators;
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("asio-race");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto waiter = rs.new_mutex(name, {.tries = redsync::unlimited_tries});
    asio::io_context io;
    std::optional<std::size_t> winner;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          asio::steady_timer timeout(co_await asio::this_coro::executor, 300ms);
          auto first = co_await (redsync::async_lock(waiter, {}, asio::use_awaitable) ||
                                 timeout.async_wait(asio::use_awaitable));
          winner = first.index();
        },
        asio::detached);
    io.run();
    REQUIRE(winner);
    CHECK(*winner == 1);
    CHECK_FALSE(waiter.held());
    REQUIRE(holder.unlock(redsync::context{}).ok());
    for (std::size_t i = 0; i < c.size(); ++i) {
      CAPTURE(i);
      CHECK(wait_until([&] { return asio_test_no_keys(c[i], name); }, 5s));
    }
  }

  TEST_CASE("a cancellation that arrives after the acquisition finished is ignored: the lock is held") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("asio-late-cancel"));
    asio::io_context io;
    asio::cancellation_signal cancel;
    std::optional<redsync::result> outcome;
    redsync::async_lock(
        m, {}, asio::bind_cancellation_slot(cancel.slot(), asio::bind_executor(io, [&](redsync::result r) {
                                              outcome = std::move(r);
                                            })));
    // The library is done (the lock is held) but io has not run the
    // completion yet: the cancellation comes too late to change anything.
    REQUIRE(wait_until([&] { return m.held(); }, 5s));
    cancel.emit(asio::cancellation_type::total);
    io.run();
    REQUIRE(outcome);
    CHECK_MESSAGE(outcome->ok(), outcome->describe());
    CHECK(m.held());
    CHECK_FALSE(cancel.slot().has_handler());
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a cancelled permit acquisition reports cancelled and leaves only the holder's permit") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("asio-sem-cancel");
    auto sem = rs.new_semaphore(name, 1, {.tries = redsync::unlimited_tries, .retry_delay = 1s});
    auto held = sem.acquire(redsync::context::timeout(5s));
    REQUIRE_MESSAGE(held.ok(), held.describe());
    asio::io_context io;
    asio::cancellation_signal cancel;
    asio::steady_timer soon(io, 300ms);
    soon.async_wait([&](std::error_code) { cancel.emit(asio::cancellation_type::terminal); });
    std::optional<redsync::acquire_result> outcome;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          outcome = co_await redsync::async_acquire(
              sem, {}, asio::bind_cancellation_slot(cancel.slot(), asio::use_awaitable));
        },
        asio::detached);
    io.run();
    REQUIRE(outcome);
    CHECK_MESSAGE(outcome->outcome.is(redsync::errc::cancelled), outcome->describe());
    CHECK_FALSE(outcome->permit.held());
    for (std::size_t i = 0; i < c.size(); ++i) {
      CAPTURE(i);
      redis_client n(c[i]);
      CHECK(wait_until([&] { return permits_on(n, name) == 1; }, 5s));
    }
    REQUIRE(held.permit.release().ok());
    auto next = sem.try_acquire({});
    CHECK_MESSAGE(next.ok(), next.describe());
  }

  TEST_CASE("a coroutine acquires a semaphore permit and releases it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("asio-semaphore");
    auto sem = rs.new_semaphore(name, 2);
    asio::io_context io;
    std::optional<redsync::acquire_result> acquired;
    std::optional<redsync::result> released;
    long long permits_while_held = -1;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto a = co_await redsync::async_acquire(sem, redsync::context::timeout(5s), asio::use_awaitable);
          redis_client n0(c[0]);
          permits_while_held = permits_on(n0, name);
          if (a) released = co_await redsync::async_release(a.permit, {}, asio::use_awaitable);
          acquired = std::move(a);
        },
        asio::detached);
    io.run();
    REQUIRE(acquired);
    CHECK_MESSAGE(acquired->ok(), acquired->describe());
    CHECK(permits_while_held == 1);
    REQUIRE(released);
    CHECK_MESSAGE(released->ok(), released->describe());
    for (std::size_t i = 0; i < c.size(); ++i) {
      redis_client n(c[i]);
      CHECK(permits_on(n, name) == 0);
    }
  }
}
