// The background thread of an owned loop parks while callers borrow the
// loop (loop_owner.hpp): timers a borrower leaves due must still fire with
// nobody calling, whatever rang during earlier borrows. No servers: libuv
// timers on the library's event_loop.

#include "transport/event_loop.hpp"

#include "take_loop.hpp"

#include <doctest/doctest.h>

#include <uv.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

using namespace std::chrono_literals;
using redsync::detail::event_loop;

namespace {

using clock_type = std::chrono::steady_clock;

void count(uv_timer_t* t) {
  static_cast<std::atomic<int>*>(t->data)->fetch_add(1);
}

}  // namespace

TEST_CASE("a timer left due by a borrower fires with nobody calling, after a wake-up rang during a borrow") {
  event_loop loop(nullptr);
  std::optional<event_loop::borrow> lent;
  uv_timer_t first{}, end_of_turns{}, second{};
  std::atomic<int> fired_first{0}, fired_end{0}, fired_second{0};
  first.data = &fired_first;
  end_of_turns.data = &fired_end;
  second.data = &fired_second;

  // The library's thread running and parked (lending: a caller asked), with
  // nothing due.
  redsync::test::take_loop(loop, lent);
  REQUIRE(lent.has_value());
  lent.reset();
  loop.post([] {});
  std::this_thread::sleep_for(100ms);

  // Borrower 1 leaves a timer due in 50 ms: the parked thread's timerfd is
  // set to ring then.
  redsync::test::take_loop(loop, lent);
  REQUIRE(lent.has_value());
  uv_timer_init(loop.loop(), &first);
  uv_timer_init(loop.loop(), &end_of_turns);
  uv_timer_init(loop.loop(), &second);
  uv_timer_start(&first, &count, 50, 0);
  lent.reset();

  // Borrower 2 takes the loop at once and holds it past that time (the
  // timerfd rings while it holds the loop; the timer fires on borrower 2).
  redsync::test::take_loop(loop, lent);
  REQUIRE(lent.has_value());
  uv_timer_start(&end_of_turns, &count, 200, 0);
  lent->run_until([&] { return fired_end.load() == 1; });
  CHECK(fired_first == 1);
  // It leaves another timer due, and gives the loop back.
  uv_timer_start(&second, &count, 100, 0);
  lent.reset();

  // Nobody calls: the library's thread must wake for it.
  const auto until = clock_type::now() + 3s;
  while (fired_second == 0 && clock_type::now() < until) std::this_thread::sleep_for(5ms);
  CHECK(fired_second == 1);

  redsync::test::take_loop(loop, lent);
  REQUIRE(lent.has_value());
  std::atomic<int> closed{0};
  for (uv_timer_t* t : {&first, &end_of_turns, &second}) {
    t->data = &closed;
    uv_close(reinterpret_cast<uv_handle_t*>(t),
             [](uv_handle_t* h) { static_cast<std::atomic<int>*>(h->data)->fetch_add(1); });
  }
  lent->run_until([&] { return closed.load() == 3; });
  lent.reset();
}
