// The holder's calls' decisions without a network (lib/redlock/mutex/
// holder_steps.hpp): unlock, extend (by hand, automatic, with a duration of
// its own) and check, over every answer of 1 to 5 nodes, every state of
// the mutex when the call's turn comes, and the validity's edge.

#include "tally_count.hpp"

#include <doctest/doctest.h>

#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/mutex/holder_steps.hpp"
#include "redlock/quorum.hpp"

#include <array>
#include <chrono>
#include <vector>

// Named, not anonymous: the unit tests are a unity build, whose sources
// share one translation unit.
namespace holder_steps_test {

using namespace std::chrono_literals;
using namespace redsync::detail;
using redsync::errc;
using redsync::node_status;
using step_kind = holder_step::kind;
using clock_type = std::chrono::steady_clock;

const clock_type::time_point t0 = clock_type::time_point{} + 24h;
constexpr auto expiry = 1000ms;
const auto drift_allowance = drift(expiry, 0.01);

// excluded: a node that said yes but does not vote (twin node names, the
// restart guard) counts as unusable, never as a yes.
constexpr std::array all_answers{node_status::ok,          node_status::taken,   node_status::missing,
                                 node_status::reply_error, node_status::timeout, node_status::unreachable,
                                 node_status::not_awaited, node_status::excluded};

tally tally_of(const std::vector<node_status>& answers) {
  tally t;
  for (const auto a : answers) {
    redsync::test::count_answer(t, a, 0);
  }
  return t;
}

template <class F>
void for_every_answer(F&& f) {
  for (std::size_t n = 1; n <= 5; ++n) {
    std::size_t combinations = 1;
    for (std::size_t i = 0; i < n; ++i) combinations *= all_answers.size();
    for (std::size_t code = 0; code < combinations; ++code) {
      std::vector<node_status> answers(n);
      std::size_t c = code;
      for (auto& a : answers) {
        a = all_answers[c % all_answers.size()];
        c /= all_answers.size();
      }
      f(n, tally_of(answers));
    }
  }
}

holder_rules rules(std::size_t n, holder_call call, std::chrono::milliseconds duration = expiry) {
  return {.nodes = n,
          .quorum = quorum(n),
          .call = call,
          .expiry = expiry,
          .duration = duration,
          .drift = duration == expiry ? drift_allowance : drift(duration, 0.01)};
}

const holder_facts holding{.has_value = true, .watchdog_active = true, .lost = false, .let_go = false};

TEST_SUITE_BEGIN("holder steps");

TEST_CASE("an unlock goes out whatever its context says, and only a value to release stops it") {
  for (const bool has_value : {false, true}) {
    holder_steps m(rules(3, holder_call::release));
    const auto s = m.start(t0, t0 - 1s, {.has_value = has_value});  // deadline long passed
    CHECK(s.what == (has_value ? step_kind::send_release : step_kind::finish));
    if (!has_value) CHECK(s.error == errc::not_held);
  }
}

TEST_CASE(
    "an unlock succeeds only with a quorum of yes, reports a loss whatever the answers, and ends the "
    "acquisition unless no_quorum leaves the value maybe on some nodes") {
  for_every_answer([](std::size_t n, const tally& t) {
    for (const bool lost : {false, true}) {
      CAPTURE(n);
      CAPTURE(t.ok);
      CAPTURE(lost);
      holder_steps m(rules(n, holder_call::release));
      REQUIRE(m.start(t0, t0 + 1s, {.has_value = true}).what == step_kind::send_release);
      const auto s = m.on_released(t, lost);
      REQUIRE(s.what == step_kind::finish);
      const bool ok = t.ok >= quorum(n);
      const errc verdict = ok ? errc{} : holder_failure(t, quorum(n));
      CHECK(s.error == (lost ? errc::lost : verdict));
      CHECK(s.mark_released == (ok || s.error != errc::no_quorum));
      // "taken" or "expired" only when no quorum can still hold our value.
      if (s.error == errc::taken || s.error == errc::expired) CHECK(t.taken + t.missing > n - quorum(n));
      CHECK(m.on_released(t, lost).what == step_kind::nothing);
    }
  });
}

TEST_CASE(
    "an extension or a check is refused, in this order, for a stopped watchdog, a passed deadline, no "
    "value, a lost lock, a lock let go") {
  for (const auto call : {holder_call::extend, holder_call::auto_extend, holder_call::check}) {
    for (int bits = 0; bits < 32; ++bits) {
      const holder_facts f{.has_value = (bits & 1) != 0,
                           .watchdog_active = (bits & 2) != 0,
                           .lost = (bits & 4) != 0,
                           .let_go = (bits & 8) != 0};
      const bool late = (bits & 16) != 0;
      CAPTURE(static_cast<int>(call));
      CAPTURE(bits);
      holder_steps m(rules(3, call));
      const auto s = m.start(t0, late ? t0 : t0 + 1s, f);
      const bool extends = call != holder_call::check;
      errc expected{};
      if (call == holder_call::auto_extend && !f.watchdog_active)
        expected = errc::not_held;
      else if (late)
        expected = errc::deadline_exceeded;
      else if (!f.has_value)
        expected = errc::not_held;
      else if (extends && f.lost)
        expected = errc::lost;
      else if (extends && f.let_go)
        expected = errc::not_held;
      if (expected == errc{}) {
        CHECK(s.what == step_kind::prepare_round);
      } else {
        CHECK(s.what == step_kind::finish);
        CHECK(s.error == expected);
      }
    }
  }
}

TEST_CASE(
    "an extension's validity is duration - elapsed - drift from its round's start; none left is "
    "validity_elapsed; a loss meanwhile releases the keys it re-armed") {
  for (const auto duration : {expiry, 400ms}) {
    const auto r = rules(3, holder_call::extend, duration);
    const auto last_valid = t0 + duration - r.drift - 1us;
    for (const auto answered_at : {t0 + 1ms, last_valid, last_valid + 1us}) {
      for (const bool lost : {false, true}) {
        CAPTURE(duration.count());
        CAPTURE(lost);
        holder_steps m(r);
        REQUIRE(m.start(t0 - 5ms, t0 + 1h, holding).what == step_kind::prepare_round);
        const auto send = m.on_round_ready(t0);
        REQUIRE(send.what == step_kind::send_round);
        // A shorter TTL cuts the validity before anything is sent.
        CHECK(send.cut_validity == (duration != expiry));
        if (send.cut_validity) CHECK(send.valid_until == t0 + duration - r.drift);
        auto s = m.on_answered(tally_of({node_status::ok, node_status::ok, node_status::taken}), answered_at);
        if (answered_at > last_valid) {
          CHECK(s.what == step_kind::finish);
          CHECK(s.error == errc::validity_elapsed);
          continue;
        }
        REQUIRE(s.what == step_kind::set_validity);
        CHECK(s.valid_until == t0 + duration - r.drift);
        s = m.on_validity_set(lost);
        CHECK(s.what == step_kind::finish);
        CHECK(s.error == (lost ? errc::lost : errc{}));
        CHECK(s.release_everywhere == lost);
      }
    }
  }
}

TEST_CASE("an extension or a check succeeds only with a quorum of yes; a check never sets a validity") {
  for (const auto call : {holder_call::extend, holder_call::auto_extend, holder_call::check}) {
    for_every_answer([call](std::size_t n, const tally& t) {
      CAPTURE(n);
      CAPTURE(t.ok);
      holder_steps m(rules(n, call));
      REQUIRE(m.start(t0, t0 + 1h, holding).what == step_kind::prepare_round);
      const auto send = m.on_round_ready(t0);
      CHECK_FALSE(send.cut_validity);
      const auto s = m.on_answered(t, t0 + 1ms);
      if (t.ok < quorum(n)) {
        CHECK(s.what == step_kind::finish);
        CHECK(s.error == holder_failure(t, quorum(n)));
        CHECK(s.error != errc{});
      } else if (call == holder_call::check) {
        CHECK(s.what == step_kind::finish);
        CHECK(s.error == errc{});
      } else {
        CHECK(s.what == step_kind::set_validity);
      }
    });
  }
}

TEST_CASE("a holder's steps ignore events out of turn") {
  holder_steps m(rules(3, holder_call::extend));
  const tally yes = tally_of({node_status::ok, node_status::ok, node_status::ok});
  CHECK(m.on_round_ready(t0).what == step_kind::nothing);
  CHECK(m.on_answered(yes, t0).what == step_kind::nothing);
  CHECK(m.on_validity_set(false).what == step_kind::nothing);
  CHECK(m.on_released(yes, false).what == step_kind::nothing);
  REQUIRE(m.start(t0, t0 + 1h, holding).what == step_kind::prepare_round);
  CHECK(m.start(t0, t0 + 1h, holding).what == step_kind::nothing);
  CHECK(m.on_answered(yes, t0).what == step_kind::nothing);
  REQUIRE(m.on_round_ready(t0).what == step_kind::send_round);
  CHECK(m.on_released(yes, false).what == step_kind::nothing);
  REQUIRE(m.on_answered(yes, t0).what == step_kind::set_validity);
  CHECK(m.on_answered(yes, t0).what == step_kind::nothing);
  REQUIRE(m.on_validity_set(false).what == step_kind::finish);
  CHECK(m.on_validity_set(false).what == step_kind::nothing);
}

TEST_CASE(
    "an unlock of a reentrant mutex held more than once takes one hold and sends nothing, only while the "
    "lock "
    "is valid and only when not asked for every hold") {
  for (int bits = 0; bits < 64; ++bits) {
    for (const std::size_t holds : {0, 1, 2, 5}) {
      const bool every_hold = (bits & 32) != 0;
      const holder_facts f{
          .has_value = (bits & 1) == 0,
          .watchdog_active = true,
          .lost = (bits & 2) != 0,
          .let_go = (bits & 4) != 0,
          .holds = holds,
          .until = (bits & 8) != 0 ? t0 : t0 + 1ms};  // the validity's last moment is not valid
      const bool late = (bits & 16) != 0;             // an unlock ignores its deadline, re-entrant or not
      CAPTURE(bits);
      CAPTURE(holds);
      auto r = rules(3, holder_call::release);
      r.every_hold = every_hold;
      holder_steps m(r);
      const bool drops = f.has_value && holds > 1 && !f.lost && !f.let_go && (bits & 8) == 0 && !every_hold;
      CHECK(m.drops_a_hold(f, t0) == drops);
      const auto s = m.start(t0, late ? t0 : t0 + 1s, f);
      if (drops) {
        CHECK(s.what == step_kind::finish);
        CHECK(s.error == errc{});
        CHECK(s.drop_hold);
        CHECK_FALSE(s.mark_released);
      } else if (!f.has_value) {
        // Released already: a hold still owed (after a loss) is paid, with
        // nothing sent; the destructor's release pays them all anyway.
        CHECK(s.what == step_kind::finish);
        CHECK(s.error == errc::not_held);
        CHECK(s.drop_hold == (holds > 0 && !every_hold));
      } else {
        CHECK(s.what == step_kind::send_release);
      }
    }
  }
  // Only an unlock drops a hold.
  for (const auto call : {holder_call::extend, holder_call::auto_extend, holder_call::check}) {
    holder_steps m(rules(3, call));
    CHECK_FALSE(m.drops_a_hold({.has_value = true, .holds = 3, .until = t0 + 1s}, t0));
  }
}

TEST_SUITE_END();

}  // namespace holder_steps_test
