// The acquisition's decisions without a network (lib/redlock/mutex/
// acquisition_steps.hpp): made-up answers of 1 to 5 nodes, token votes,
// write-backs, elapsed times, wake-ups and refused transactions, walked
// exhaustively for one attempt and in seeded random orders for whole runs,
// with the invariants checked on every step the machine answers.

#include "tally_count.hpp"

#include <doctest/doctest.h>

#include "redlock/mutex/acquisition_steps.hpp"
#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/mutex/fencing.hpp"
#include "redlock/quorum.hpp"

#include <redsync/retries.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

// Reaching the unlimited_tries cap by attempts would take 2^31 of them: the
// count is set instead (a friend of the machine, not its API).
namespace redsync::detail {
struct acquisition_steps_test_access {
  static void count_tries(acquisition_steps& m, int tries) { m.tries_ = tries; }
};
}  // namespace redsync::detail

// Named, not anonymous: the unit tests are a unity build, whose sources
// share one translation unit.
namespace acquisition_steps_test {

using namespace std::chrono_literals;
using namespace redsync::detail;
using redsync::errc;
using redsync::node_status;
using kind = acquisition_step::kind;
using phase = acquisition_steps::phase;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Any reading of the steady clock will do; the machine never reads one.
const clock_type::time_point t0 = clock_type::time_point{} + 24h;

constexpr auto expiry = 1000ms;
const auto drift_allowance = drift(expiry, 0.01);  // 12 ms

constexpr std::array all_answers{node_status::ok,          node_status::taken,       node_status::excluded,
                                 node_status::timeout,     node_status::reply_error, node_status::unreachable,
                                 node_status::not_awaited, node_status::missing};

// A round's report, counted as run_round counts it.
tally tally_of(const std::vector<node_status>& answers, const std::vector<long long>& counters = {}) {
  tally t;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    redsync::test::count_answer(t, answers[i], i < counters.size() ? counters[i] : 7);
  }
  return t;
}

// Delays asked of the rules, in order of the try numbers they were asked for.
struct delays {
  std::vector<int> asked;
  milliseconds each{100};
};

acquisition_rules rules(std::size_t nodes, int tries, delays& d) {
  return {.nodes = nodes,
          .quorum = quorum(nodes),
          .tries = tries,
          .expiry = expiry,
          .drift = drift_allowance,
          .retry_delay = [&d](int n) {
            d.asked.push_back(n);
            return d.each;
          }};
}

bool said_yes(node_status s) {
  return s == node_status::ok || s == node_status::excluded;
}

bool may_still_apply_the_set(node_status s) {
  return s == node_status::timeout || s == node_status::unreachable || s == node_status::not_awaited ||
         s == node_status::reply_error;
}

// The undo of a failed attempt: awaited exactly where a node said yes,
// sent unawaited exactly where it may still apply our SET.
void check_undo(const acquisition_step& s, const std::vector<node_status>& answers) {
  REQUIRE(s.what == kind::undo);
  REQUIRE(s.undo_awaited.size() == answers.size());
  REQUIRE(s.undo_unawaited.size() == answers.size());
  for (std::size_t i = 0; i < answers.size(); ++i) {
    CAPTURE(i);
    const std::string answer(redsync::to_string(answers[i]));
    CAPTURE(answer);
    CHECK(s.undo_awaited[i] == said_yes(answers[i]));
    CHECK(s.undo_unawaited[i] == may_still_apply_the_set(answers[i]));
  }
}

// A machine taken to its first attempt's round, sent at t0.
acquisition_steps in_first_round(acquisition_rules r) {
  acquisition_steps m(std::move(r));
  REQUIRE(m.start(t0, t0 + 1h).what == kind::claim_value);
  REQUIRE(m.on_claimed(true, t0).what == kind::prepare_attempt);
  REQUIRE(m.on_surveyed(t0).what == kind::send_attempt);
  return m;
}

// The answers numbered `code` in base all_answers.size(), for n nodes.
std::vector<node_status> answers_numbered(std::size_t code, std::size_t n) {
  std::vector<node_status> a(n);
  for (std::size_t i = 0; i < n; ++i, code /= all_answers.size())
    a[i] = all_answers[code % all_answers.size()];
  return a;
}

std::size_t combinations(std::size_t n) {
  std::size_t c = 1;
  for (std::size_t i = 0; i < n; ++i) c *= all_answers.size();
  return c;
}

// Every event the machine takes, with the phases it is in turn in, fired
// with the arguments that would do most harm out of turn: a yes from every
// node, a token the whole quorum holds, a write-back that held.
struct event {
  const char* name;
  std::vector<phase> in_turn;
  acquisition_step (*fire)(acquisition_steps& m, std::size_t nodes, clock_type::time_point now);
};

const std::vector<event> events{
    {"start", {phase::not_started}, [](auto& m, auto, auto now) { return m.start(now, now + 1h); }},
    {"on_claimed", {phase::claiming}, [](auto& m, auto, auto now) { return m.on_claimed(true, now); }},
    {"on_surveyed", {phase::preparing}, [](auto& m, auto, auto now) { return m.on_surveyed(now); }},
    {"on_attempt_answered",
     {phase::attempt_round},
     [](auto& m, auto n, auto) { return m.on_attempt_answered(tally_of(std::vector(n, node_status::ok))); }},
    {"on_token_votes",
     {phase::counting_votes},
     [](auto& m, auto n, auto now) { return m.on_token_votes(9, n, now); }},
    {"on_token_written",
     {phase::write_back_round},
     [](auto& m, auto, auto now) { return m.on_token_written(true, now); }},
    {"on_undo_finished",
     {phase::undo_round},
     [](auto& m, auto, auto now) { return m.on_undo_finished(now); }},
    {"on_listening",
     {phase::listening},
     [](auto& m, auto, auto now) { return m.on_listening(true, true, now); }},
    {"on_retry_due", {phase::waiting_for_retry}, [](auto& m, auto, auto now) { return m.on_retry_due(now); }},
    {"on_quorum_opened",
     {phase::waiting_for_retry},
     [](auto& m, auto, auto now) { return m.on_quorum_opened(now); }},
    {"on_subscribed",
     {phase::waiting_for_retry},
     [](auto& m, auto, auto now) { return m.on_subscribed(now); }},
};

bool in_turn(const event& e, phase p) {
  return std::find(e.in_turn.begin(), e.in_turn.end(), p) != e.in_turn.end();
}

// Fires `e` out of turn: it must be answered with `nothing` and leave what
// the driver reads as it was.
void fire_out_of_turn(acquisition_steps& m, const event& e, std::size_t nodes, clock_type::time_point now) {
  const phase before = m.current();
  REQUIRE_FALSE(in_turn(e, before));
  const int tries = m.tries_counted();
  const bool in_flight = m.round_in_flight();
  const std::string event_name = e.name;  // a const char* would be shown as an address
  CAPTURE(event_name);
  CAPTURE(static_cast<int>(before));
  CHECK(e.fire(m, nodes, now).what == kind::nothing);
  CHECK(m.current() == before);
  CHECK(m.tries_counted() == tries);
  CHECK(m.round_in_flight() == in_flight);
}

void check_same_step(const acquisition_step& a, const acquisition_step& b) {
  CHECK(a.what == b.what);
  CHECK(a.until_try == b.until_try);
  CHECK(a.final_try == b.final_try);
  CHECK(a.first_attempt == b.first_attempt);
  CHECK(a.at_once == b.at_once);
  CHECK(a.undo_awaited == b.undo_awaited);
  CHECK(a.undo_unawaited == b.undo_unawaited);
  CHECK(a.token == b.token);
  CHECK(a.attempt_start == b.attempt_start);
  CHECK(a.valid_until == b.valid_until);
  CHECK(a.error == b.error);
}

TEST_SUITE_BEGIN("acquisition steps");

TEST_CASE("an acquisition whose deadline passed fails with deadline_exceeded before it claims the value") {
  delays d;
  acquisition_steps m(rules(3, 5, d));
  const auto s = m.start(t0, t0);
  CHECK(s.what == kind::failed);
  CHECK(s.error == errc::deadline_exceeded);
  CHECK(m.tries_counted() == 0);
  CHECK(m.on_claimed(true, t0).what == kind::nothing);
}

TEST_CASE("a mutex that already holds a value fails with already_held before any attempt") {
  delays d;
  acquisition_steps m(rules(3, 5, d));
  REQUIRE(m.start(t0, t0 + 1s).what == kind::claim_value);
  const auto s = m.on_claimed(false, t0);
  CHECK(s.what == kind::failed);
  CHECK(s.error == errc::already_held);
  CHECK(m.tries_counted() == 0);
  CHECK(d.asked.empty());
}

TEST_CASE("a re-entry finishes at the claim without an attempt: success while valid, lost or expired after") {
  const std::pair<claim_outcome, acquisition_step> cases[] = {
      {claim_outcome::reentered, {.what = kind::reentered}},
      {claim_outcome::reentry_lost, {.what = kind::failed, .error = errc::lost}},
      {claim_outcome::reentry_expired, {.what = kind::failed, .error = errc::expired}},
      {claim_outcome::held, {.what = kind::failed, .error = errc::already_held}},
  };
  for (const auto& [claim, expected] : cases) {
    CAPTURE(static_cast<int>(claim));
    delays d;
    acquisition_steps m(rules(3, 5, d));
    REQUIRE(m.start(t0, t0 + 1s).what == kind::claim_value);
    const auto s = m.on_claimed(claim, t0);
    CHECK(s.what == expected.what);
    CHECK(s.error == expected.error);
    CHECK(m.current() == acquisition_steps::phase::done);
    CHECK_FALSE(m.round_in_flight());
    CHECK(m.tries_counted() == 0);
    CHECK(d.asked.empty());
    // Nothing follows: no event starts an attempt afterwards.
    CHECK(m.on_surveyed(t0).what == kind::nothing);
    CHECK(m.on_claimed(claim_outcome::claimed, t0).what == kind::nothing);
  }
}

TEST_CASE(
    "every answer of 1 to 5 nodes to one attempt: acquired only with a quorum of counted yes, and "
    "every failure undoes the yes nodes (awaited) and the nodes that may still apply the SET") {
  for (std::size_t n = 1; n <= 5; ++n) {
    const std::size_t q = quorum(n);
    for (std::size_t code = 0; code < combinations(n); ++code) {
      const auto answers = answers_numbered(code, n);
      const tally t = tally_of(answers);
      CAPTURE(n);
      CAPTURE(code);
      delays d;
      acquisition_steps m = in_first_round(rules(n, 1, d));
      const auto judged = m.on_attempt_answered(t);
      if (t.ok < q) {
        check_undo(judged, answers);
        CHECK(m.round_in_flight());
        const auto end = m.on_undo_finished(t0 + 5ms);
        CHECK(end.what == kind::failed);
        CHECK(end.error == acquire_failure(t, n, q));
        CHECK(end.error != errc{});
        continue;
      }
      REQUIRE(judged.what == kind::count_token_votes);
      const token_votes votes = count_token_votes(t, n);
      const auto s = m.on_token_votes(votes.token, votes.at_token, t0 + 5ms);
      CHECK(s.what == kind::acquired);
      CHECK(s.token == 7);
      CHECK(s.attempt_start == t0);
      CHECK(s.valid_until == t0 + expiry - drift_allowance);
      CHECK(m.current() == phase::done);
    }
  }
}

TEST_CASE(
    "a quorum at the token is acquired at once; short of it the token is written back, and a "
    "write-back that misses the quorum fails with no_quorum and undoes the attempt") {
  for (std::size_t n = 1; n <= 5; ++n) {
    const std::size_t q = quorum(n);
    // The winners: the first k nodes (k >= q), the others taken; the
    // first `low` of the winners answered a counter below the others'.
    for (std::size_t k = q; k <= n; ++k) {
      for (std::size_t low = 0; low <= k; ++low) {
        for (const bool written : {false, true}) {
          CAPTURE(n);
          CAPTURE(k);
          CAPTURE(low);
          CAPTURE(written);
          std::vector<node_status> answers(n, node_status::taken);
          std::vector<long long> counters(n, 0);
          for (std::size_t i = 0; i < k; ++i) {
            answers[i] = node_status::ok;
            counters[i] = i < low ? 4 : 9;
          }
          const tally t = tally_of(answers, counters);
          delays d;
          acquisition_steps m = in_first_round(rules(n, 1, d));
          REQUIRE(m.on_attempt_answered(t).what == kind::count_token_votes);
          const token_votes votes = count_token_votes(t, n);
          const auto s = m.on_token_votes(votes.token, votes.at_token, t0 + 1ms);
          if (votes.at_token >= q) {
            CHECK(s.what == kind::acquired);
            CHECK(s.token == votes.token);
            continue;
          }
          REQUIRE(s.what == kind::write_back_token);
          CHECK(s.token == votes.token);
          CHECK(m.round_in_flight());
          const auto after = m.on_token_written(written, t0 + 2ms);
          if (written) {
            CHECK(after.what == kind::acquired);
            CHECK(after.token == votes.token);
            continue;
          }
          check_undo(after, answers);
          const auto end = m.on_undo_finished(t0 + 3ms);
          CHECK(end.what == kind::failed);
          CHECK(end.error == errc::no_quorum);
        }
      }
    }
  }
}

TEST_CASE("a quorum that answered once expiry - elapsed - drift is spent is undone with validity_elapsed") {
  const auto last_valid = t0 + expiry - drift_allowance - 1us;
  for (const bool write_back : {false, true}) {
    for (const auto answered_at : {t0, last_valid, last_valid + 1us, t0 + expiry}) {
      CAPTURE(write_back);
      const std::vector answers{node_status::ok, node_status::ok, node_status::timeout};
      const tally t = tally_of(answers, {3, write_back ? 2 : 3, 0});
      delays d;
      acquisition_steps m = in_first_round(rules(3, 1, d));
      REQUIRE(m.on_attempt_answered(t).what == kind::count_token_votes);
      const token_votes votes = count_token_votes(t, 3);
      auto s = m.on_token_votes(votes.token, votes.at_token, answered_at);
      if (write_back) {
        REQUIRE(s.what == kind::write_back_token);
        s = m.on_token_written(true, answered_at);
      }
      if (answered_at <= last_valid) {
        CHECK(s.what == kind::acquired);
        continue;
      }
      check_undo(s, answers);
      const auto end = m.on_undo_finished(answered_at);
      CHECK(end.what == kind::failed);
      CHECK(end.error == errc::validity_elapsed);
    }
  }
}

TEST_CASE(
    "lock() makes exactly `tries` counted tries when only the retry timer wakes it, each delay asked "
    "once, and the last try is the final one") {
  for (int tries = 1; tries <= 6; ++tries) {
    CAPTURE(tries);
    delays d;
    acquisition_steps m(rules(3, tries, d));
    REQUIRE(m.start(t0, t0 + 1h).what == kind::claim_value);
    auto s = m.on_claimed(true, t0);
    auto now = t0;
    int attempts = 0;
    while (s.what == kind::prepare_attempt) {
      ++attempts;
      CHECK(s.final_try == (attempts == tries));
      CHECK(s.until_try == (attempts < tries ? d.each : 0ms));
      REQUIRE(m.on_surveyed(now).what == kind::send_attempt);
      check_undo(
          s = m.on_attempt_answered(tally_of({node_status::taken, node_status::taken, node_status::ok})),
          {node_status::taken, node_status::taken, node_status::ok});
      s = m.on_undo_finished(now + 2ms);
      if (s.what != kind::listen) break;
      s = m.on_listening(false, false, now + 2ms);
      REQUIRE(s.what == kind::wait_for_retry);
      CHECK(s.until_try == d.each - 2ms);
      now += d.each;
      s = m.on_retry_due(now);
    }
    CHECK(s.what == kind::failed);
    CHECK(s.error == errc::busy);
    CHECK(attempts == tries);
    CHECK(m.tries_counted() == tries);
    std::vector<int> expected(static_cast<std::size_t>(tries - 1));
    for (int k = 1; k < tries; ++k) expected[static_cast<std::size_t>(k - 1)] = k;
    CHECK(d.asked == expected);
  }
}

TEST_CASE("the retry after a refused transaction goes at once and is not counted as a try") {
  delays d;
  acquisition_steps m(rules(3, 2, d));
  REQUIRE(m.start(t0, t0 + 1h).what == kind::claim_value);
  REQUIRE(m.on_claimed(true, t0).what == kind::prepare_attempt);
  REQUIRE(m.on_surveyed(t0).what == kind::send_attempt);
  m.on_transaction_refused();
  const auto refused = tally_of({node_status::reply_error, node_status::reply_error, node_status::ok});
  REQUIRE(m.on_attempt_answered(refused).what == kind::undo);
  const auto retry = m.on_undo_finished(t0 + 1ms);
  CHECK(retry.what == kind::prepare_attempt);
  CHECK(retry.final_try == false);
  CHECK(m.tries_counted() == 1);
  // Once only: a second refusal does not buy a second free retry.
  m.on_transaction_refused();
  REQUIRE(m.on_surveyed(t0 + 1ms).what == kind::send_attempt);
  REQUIRE(m.on_attempt_answered(refused).what == kind::undo);
  CHECK(m.on_undo_finished(t0 + 2ms).what == kind::listen);
  CHECK(m.tries_counted() == 1);
}

TEST_CASE(
    "a wake-up before the try is due starts an attempt that is not counted, and the wait is rounded up") {
  delays d;
  acquisition_steps m(rules(3, 2, d));
  REQUIRE(m.start(t0, t0 + 1h).what == kind::claim_value);
  REQUIRE(m.on_claimed(true, t0).what == kind::prepare_attempt);
  REQUIRE(m.on_surveyed(t0).what == kind::send_attempt);
  REQUIRE(
      m.on_attempt_answered(tally_of({node_status::taken, node_status::taken, node_status::taken})).what ==
      kind::undo);
  REQUIRE(m.on_undo_finished(t0 + 1ms).what == kind::listen);
  const auto wait = m.on_listening(false, false, t0 + 1ms + 500us);
  REQUIRE(wait.what == kind::wait_for_retry);
  CHECK(wait.until_try == 99ms);  // 98.5 ms, rounded up: never before the try is due
  CHECK_FALSE(wait.at_once);
  const auto early = m.on_quorum_opened(t0 + 40ms);
  REQUIRE(early.what == kind::prepare_attempt);
  CHECK(m.tries_counted() == 1);
  CHECK_FALSE(early.final_try);
  CHECK(early.until_try == 60ms);
}

TEST_CASE("wake-ups and subscription confirmations start an attempt only while waiting for the retry") {
  delays d;
  acquisition_steps m(rules(3, 3, d));
  const auto ignored = [&m] {
    CHECK(m.on_quorum_opened(t0).what == kind::nothing);
    CHECK(m.on_subscribed(t0).what == kind::nothing);
    CHECK(m.on_retry_due(t0).what == kind::nothing);
  };
  ignored();
  REQUIRE(m.start(t0, t0 + 1h).what == kind::claim_value);
  ignored();
  REQUIRE(m.on_claimed(true, t0).what == kind::prepare_attempt);
  ignored();
  REQUIRE(m.on_surveyed(t0).what == kind::send_attempt);
  ignored();
  REQUIRE(
      m.on_attempt_answered(tally_of({node_status::ok, node_status::ok, node_status::ok}, {1, 2, 3})).what ==
      kind::count_token_votes);
  ignored();
  REQUIRE(m.on_token_votes(3, 1, t0).what == kind::write_back_token);
  ignored();
  REQUIRE(m.on_token_written(false, t0).what == kind::undo);
  ignored();
  REQUIRE(m.on_undo_finished(t0).what == kind::listen);
  ignored();
  REQUIRE(m.on_listening(false, false, t0).what == kind::wait_for_retry);
  // The confirmation looks once per acquisition, not once per wait.
  CHECK(m.on_subscribed(t0 + 1ms).what == kind::prepare_attempt);
  REQUIRE(m.on_surveyed(t0 + 1ms).what == kind::send_attempt);
  REQUIRE(
      m.on_attempt_answered(tally_of({node_status::taken, node_status::taken, node_status::taken})).what ==
      kind::undo);
  REQUIRE(m.on_undo_finished(t0 + 2ms).what == kind::listen);
  REQUIRE(m.on_listening(true, false, t0 + 2ms).what == kind::wait_for_retry);
  CHECK(m.on_subscribed(t0 + 3ms).what == kind::nothing);
}

TEST_CASE(
    "a subscription another waiter already had, or a quorum opened during the attempt, means look at "
    "once; the missed releases only once per acquisition") {
  delays d;
  acquisition_steps m(rules(3, 10, d));
  REQUIRE(m.start(t0, t0 + 1h).what == kind::claim_value);
  REQUIRE(m.on_claimed(true, t0).what == kind::prepare_attempt);
  auto now = t0;
  const auto fail_attempt = [&] {
    REQUIRE(m.on_surveyed(now).what == kind::send_attempt);
    REQUIRE(
        m.on_attempt_answered(tally_of({node_status::taken, node_status::taken, node_status::taken})).what ==
        kind::undo);
    REQUIRE(m.on_undo_finished(now).what == kind::listen);
  };
  fail_attempt();
  CHECK(m.on_listening(true, false, now).at_once);  // the releases during the attempt went unheard
  REQUIRE(m.on_retry_due(now).what == kind::prepare_attempt);
  fail_attempt();
  CHECK_FALSE(m.on_listening(true, false, now).at_once);  // looked once already
  REQUIRE(m.on_retry_due(now += 100ms).what == kind::prepare_attempt);
  fail_attempt();
  CHECK(m.on_listening(false, true, now).at_once);  // wake-ups opened a quorum meanwhile
}

TEST_CASE("a round is in flight exactly during the attempt, the write-back and the undo") {
  delays d;
  acquisition_steps m(rules(3, 1, d));
  CHECK_FALSE(m.round_in_flight());
  m.start(t0, t0 + 1h);
  CHECK_FALSE(m.round_in_flight());
  m.on_claimed(true, t0);
  CHECK_FALSE(m.round_in_flight());  // waiting for the survey: nothing sent yet
  m.on_surveyed(t0);
  CHECK(m.round_in_flight());
  m.on_attempt_answered(tally_of({node_status::ok, node_status::ok, node_status::ok}, {1, 2, 3}));
  CHECK_FALSE(m.round_in_flight());  // counting the votes
  m.on_token_votes(3, 1, t0);
  CHECK(m.round_in_flight());
  m.on_token_written(false, t0);
  CHECK(m.round_in_flight());
  m.on_undo_finished(t0);
  CHECK_FALSE(m.round_in_flight());
  CHECK(m.current() == phase::done);
}

TEST_CASE(
    "every event out of turn, in every phase, is answered with nothing and the run goes on as if it never "
    "came") {
  // A run through every phase: a write-back that misses, its undo, a wait,
  // then a second attempt that wins; one event in turn per line.
  using in_turn_event = acquisition_step (*)(acquisition_steps&);
  const std::vector<in_turn_event> run{
      [](acquisition_steps& m) { return m.start(t0, t0 + 1h); },
      [](acquisition_steps& m) { return m.on_claimed(true, t0); },
      [](acquisition_steps& m) { return m.on_surveyed(t0 + 1ms); },
      [](acquisition_steps& m) {
        return m.on_attempt_answered(
            tally_of({node_status::ok, node_status::ok, node_status::timeout}, {4, 3, 0}));
      },
      [](acquisition_steps& m) { return m.on_token_votes(4, 1, t0 + 2ms); },
      [](acquisition_steps& m) { return m.on_token_written(false, t0 + 3ms); },
      [](acquisition_steps& m) { return m.on_undo_finished(t0 + 4ms); },
      [](acquisition_steps& m) { return m.on_listening(false, false, t0 + 4ms); },
      [](acquisition_steps& m) { return m.on_retry_due(t0 + 100ms); },
      [](acquisition_steps& m) { return m.on_surveyed(t0 + 101ms); },
      [](acquisition_steps& m) {
        return m.on_attempt_answered(
            tally_of({node_status::ok, node_status::ok, node_status::taken}, {5, 5, 0}));
      },
      [](acquisition_steps& m) { return m.on_token_votes(5, 2, t0 + 102ms); },
  };
  std::vector<phase> visited;
  for (std::size_t at = 0; at <= run.size(); ++at) {
    for (const auto& e : events) {
      delays d_plain;
      delays d_disturbed;
      acquisition_steps plain(rules(3, 3, d_plain));
      acquisition_steps disturbed(rules(3, 3, d_disturbed));
      for (std::size_t i = 0; i < at; ++i) {
        run[i](plain);
        run[i](disturbed);
      }
      if (visited.size() == at) visited.push_back(plain.current());
      if (in_turn(e, plain.current())) continue;
      CAPTURE(at);
      // Late, as a stray callback would be: a survey that moved the
      // attempt's start would overstate its validity.
      fire_out_of_turn(disturbed, e, 3, t0 + 50ms);
      for (std::size_t i = at; i < run.size(); ++i) {
        CAPTURE(i);
        check_same_step(run[i](plain), run[i](disturbed));
        CHECK(plain.current() == disturbed.current());
        CHECK(plain.tries_counted() == disturbed.tries_counted());
      }
      CHECK(d_plain.asked == d_disturbed.asked);
    }
  }
  // The run went through every phase, and ended acquired.
  CHECK(visited.size() == run.size() + 1);
  for (const phase p :
       {phase::not_started, phase::claiming, phase::preparing, phase::attempt_round, phase::counting_votes,
        phase::write_back_round, phase::undo_round, phase::listening, phase::waiting_for_retry, phase::done})
    CHECK(std::find(visited.begin(), visited.end(), p) != visited.end());
}

TEST_CASE(
    "a refused transaction reported after its round still earns one retry at once, not counted, at the "
    "next failure") {
  delays d;
  acquisition_steps m(rules(3, 1, d));
  REQUIRE(m.start(t0, t0 + 1h).what == kind::claim_value);
  REQUIRE(m.on_claimed(true, t0).what == kind::prepare_attempt);
  REQUIRE(m.on_surveyed(t0).what == kind::send_attempt);
  const auto refused = tally_of({node_status::reply_error, node_status::reply_error, node_status::ok});
  REQUIRE(m.on_attempt_answered(refused).what == kind::undo);
  // The refusal's callback comes after the round reported, during the undo.
  m.on_transaction_refused();
  const auto retry = m.on_undo_finished(t0 + 1ms);
  CHECK(retry.what == kind::prepare_attempt);
  CHECK(retry.until_try == 0ms);
  CHECK(m.tries_counted() == 1);
  REQUIRE(m.on_surveyed(t0 + 1ms).what == kind::send_attempt);
  REQUIRE(m.on_attempt_answered(refused).what == kind::undo);
  const auto end = m.on_undo_finished(t0 + 2ms);
  CHECK(end.what == kind::failed);
  CHECK(m.tries_counted() == 1);
}

TEST_CASE(
    "with unlimited tries the count stops one short of the largest int: it never overflows and the tries "
    "never run out") {
  delays d;
  acquisition_steps m(rules(3, redsync::unlimited_tries, d));
  REQUIRE(m.start(t0, t0 + 1h).what == kind::claim_value);
  auto s = m.on_claimed(true, t0);
  auto now = t0;
  acquisition_steps_test_access::count_tries(m, redsync::unlimited_tries - 3);
  // Each lap: a failed attempt, its undo, the wait, the retry when due.
  for (int lap = 0; lap < 4; ++lap) {
    CAPTURE(lap);
    REQUIRE(s.what == kind::prepare_attempt);
    CHECK_FALSE(s.final_try);
    REQUIRE(m.on_surveyed(now).what == kind::send_attempt);
    REQUIRE(
        m.on_attempt_answered(tally_of({node_status::taken, node_status::taken, node_status::taken})).what ==
        kind::undo);
    REQUIRE(m.on_undo_finished(now).what == kind::listen);
    REQUIRE(m.on_listening(false, false, now).what == kind::wait_for_retry);
    now += d.each;
    s = m.on_retry_due(now);
    CHECK(m.tries_counted() == (lap == 0 ? redsync::unlimited_tries - 2 : redsync::unlimited_tries - 1));
  }
  CHECK(m.tries_counted() == redsync::unlimited_tries - 1);
  CHECK(s.what == kind::prepare_attempt);
  CHECK_FALSE(s.final_try);
}

TEST_CASE("random runs of lock() in random orders keep every invariant") {
  std::mt19937_64 rng(0x5eed);
  const auto pick = [&rng](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  // What the walk reached, so that a change in it cannot leave a path unwalked.
  std::map<std::string, int> seen;
  for (int run = 0; run < 3000; ++run) {
    const std::size_t n = 1 + pick(5);
    const std::size_t q = quorum(n);
    const int tries = 1 + static_cast<int>(pick(5));
    delays d;
    d.each = milliseconds{static_cast<long long>(pick(4) * 50)};
    acquisition_steps m(rules(n, tries, d));
    CAPTURE(run);
    CAPTURE(n);
    CAPTURE(tries);
    auto now = t0;
    // The oracle: a try counts when it starts at or after the due time.
    int counted = 0;
    auto due = t0;
    bool refused = false;
    bool free_retry_taken = false;
    int attempts = 0;
    std::vector<node_status> answers;
    auto attempt_start = t0;
    // Any event out of turn, now and then, at any phase: it is answered
    // with nothing, and the oracle's checks that follow see no trace of it.
    const auto stray = [&] {
      if (pick(3) != 0) return;
      const event& e = events[pick(events.size())];
      if (in_turn(e, m.current())) return;
      ++seen[std::string("stray ") + e.name];
      fire_out_of_turn(m, e, n, now + milliseconds{pick(50)});
    };
    stray();
    auto s = m.start(now, now + 1h);
    REQUIRE(s.what == kind::claim_value);
    stray();
    s = m.on_claimed(true, now);
    bool next_is_free = false;
    for (int step = 0; step < 200 && s.what != kind::failed && s.what != kind::acquired; ++step) {
      stray();
      switch (s.what) {
        case kind::prepare_attempt: {
          ++attempts;
          if (next_is_free) {
            due = now + (counted < tries ? d.each : 0ms);
          } else if (counted == 0 || now >= due) {
            ++counted;
            due = now + (counted < tries ? d.each : 0ms);
          }
          next_is_free = false;
          CHECK(m.tries_counted() == counted);
          CHECK(s.final_try == (counted >= tries));
          CHECK(s.until_try == (now >= due ? 0ms : std::chrono::ceil<milliseconds>(due - now)));
          now += milliseconds{pick(3)};
          attempt_start = now;
          s = m.on_surveyed(now);
          REQUIRE(s.what == kind::send_attempt);
          CHECK(s.first_attempt == (attempts == 1));
          stray();
          if (!refused && pick(6) == 0) {
            refused = true;
            m.on_transaction_refused();
          }
          // Mostly losing answers, so that runs use their tries.
          answers.assign(n, node_status::taken);
          for (auto& a : answers)
            a = pick(3) == 0 ? all_answers[pick(all_answers.size())] : node_status::taken;
          std::vector<long long> counters(n);
          for (auto& c : counters) c = 5 + static_cast<long long>(pick(2));
          now += milliseconds{pick(3) == 0 ? pick(1200) : pick(20)};
          const tally t = tally_of(answers, counters);
          s = m.on_attempt_answered(t);
          if (t.ok < q) {
            check_undo(s, answers);
            break;
          }
          REQUIRE(s.what == kind::count_token_votes);
          stray();
          const token_votes votes = count_token_votes(t, n);
          s = m.on_token_votes(votes.token, votes.at_token, now);
          bool holds = votes.at_token >= q;
          if (s.what == kind::write_back_token) {
            CHECK_FALSE(holds);
            ++seen["token written back"];
            stray();
            holds = pick(2) == 0;
            now += milliseconds{pick(5)};
            s = m.on_token_written(holds, now);
          }
          const bool valid =
              validity(expiry, std::chrono::duration_cast<std::chrono::microseconds>(now - attempt_start),
                       drift_allowance) > 0us;
          if (s.what == kind::acquired) {
            // Never acquired without a quorum of counted yes, holding the
            // token, with validity left.
            CHECK(t.ok >= q);
            CHECK(holds);
            CHECK(valid);
            CHECK(s.attempt_start == attempt_start);
            CHECK(s.valid_until == attempt_start + expiry - drift_allowance);
            CHECK(s.token == votes.token);
          } else {
            CHECK((!holds || !valid));
            check_undo(s, answers);
          }
          break;
        }
        case kind::undo: {
          CHECK(m.round_in_flight());
          now += milliseconds{pick(3)};
          s = m.on_undo_finished(now);
          if (refused && !free_retry_taken) {
            free_retry_taken = true;
            CHECK(s.what == kind::prepare_attempt);
            next_is_free = true;
            // The oracle's count is restored as the machine's (un)counts.
            break;
          }
          if (counted >= tries) {
            CHECK(s.what == kind::failed);
          } else {
            CHECK(s.what == kind::listen);
          }
          break;
        }
        case kind::listen: {
          const bool quorum_open = pick(5) == 0;
          s = m.on_listening(pick(5) == 0, quorum_open, now);
          REQUIRE(s.what == kind::wait_for_retry);
          if (quorum_open) CHECK(s.at_once);
          CHECK(s.until_try == (now >= due ? 0ms : std::chrono::ceil<milliseconds>(due - now)));
          break;
        }
        case kind::wait_for_retry: {
          // The timer, or a wake-up or confirmation before it.
          switch (pick(3)) {
            case 0:
              now += milliseconds{pick(static_cast<std::size_t>(s.until_try.count()) + 1)};
              s = m.on_quorum_opened(now);
              break;
            case 1: {
              now += milliseconds{pick(10)};
              const auto next = m.on_subscribed(now);
              if (next.what == kind::nothing) continue;
              s = next;
              break;
            }
            default:
              // The line's wait may end before the try is due, or after.
              now += milliseconds{pick(2 * static_cast<std::size_t>(s.until_try.count()) + 1)};
              s = m.on_retry_due(now);
              break;
          }
          REQUIRE(s.what == kind::prepare_attempt);
          break;
        }
        default: FAIL("unexpected step"); break;
      }
    }
    REQUIRE((s.what == kind::failed || s.what == kind::acquired));
    CHECK(m.current() == phase::done);
    stray();
    CHECK(m.tries_counted() == counted);
    if (s.what == kind::failed) CHECK(counted == tries);
    CHECK(counted <= tries);
    CHECK(attempts >= counted + (free_retry_taken ? 1 : 0));
    ++seen[s.what == kind::acquired ? "acquired" : std::string(redsync::make_error_code(s.error).message())];
    if (free_retry_taken) ++seen["free retry after a refused transaction"];
    if (attempts > counted + (free_retry_taken ? 1 : 0)) ++seen["uncounted attempts"];
  }
  std::string reached;
  for (const auto& [what, runs] : seen) reached += what + ": " + std::to_string(runs) + " runs; ";
  INFO(reached);
  CHECK(seen.size() >= 7 + events.size());
}

TEST_SUITE_END();

}  // namespace acquisition_steps_test
