// mutex_options::reentrant (docs/api.md, "Reentrancy"): the thread that
// acquired a Mutex locks it again with a hold counted locally, nothing sent,
// the value and token unchanged; the last unlock releases. What stays
// refused: another thread on the same Mutex, another Mutex of the same
// name, an unbalanced unlock, and a re-entry once the lock is gone.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

using namespace std::chrono_literals;
using namespace redsync::test;

namespace {

const redsync::context none{};

// Every command a mutex's calls may send a node (the scripts, or the first
// attempt's transaction), from INFO commandstats.
long long lock_commands(const redis_server& s) {
  redis_client cl(s);
  long long n = 0;
  for (const char* cmd : {"evalsha", "eval", "fcall", "set", "multi", "exec", "pexpire", "del"})
    n += cl.calls(cmd);
  return n;
}

// The value of `name` on every node is `value` (or, with nullopt, absent).
void check_keys(cluster& c, const std::string& name, const std::optional<std::string>& value) {
  for (std::size_t i = 0; i < c.size(); ++i) CHECK(redis_client(c[i]).get(name) == value);
}

}  // namespace

TEST_SUITE("reentrant") {
  TEST_CASE("nested locks keep the key on every node until the last unlock, which releases it") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("nested");
    auto m = rs.new_mutex(name, {.expiry = 10s, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    const auto value = m.value();
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.try_lock());
    check_keys(c, name, value);

    CHECK(m.unlock(none).ok());
    CHECK(m.held());
    check_keys(c, name, value);
    CHECK(m.unlock(none).ok());
    CHECK(m.held());
    check_keys(c, name, value);
    CHECK(m.unlock(none).ok());  // the last one
    CHECK_FALSE(m.held());
    check_keys(c, name, std::nullopt);
  }

  TEST_CASE("a re-entry sends no command and keeps the value, the validity and the fencing token") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("silent");
    auto m = rs.new_mutex(name, {.expiry = 10s, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    const auto value = m.value();
    const auto token = m.token();
    const auto until = m.until();
    const auto acquisitions = rs.stats().acquisitions.ok;
    const auto releases = rs.stats().releases.ok;
    long long before[3];
    for (std::size_t i = 0; i < c.size(); ++i) before[i] = lock_commands(c[i]);

    for (int depth = 0; depth < 6; ++depth) REQUIRE(m.lock(none).ok());
    // Only a blocking call re-enters: an asynchronous one started on the
    // owner's thread may be another task's (attack review, F1).
    CHECK(m.lock_future().get().error == redsync::errc::already_held);
    CHECK(m.value() == value);
    CHECK(m.token() == token);
    CHECK(m.until() == until);
    for (int depth = 0; depth < 6; ++depth) REQUIRE(m.unlock(none).ok());
    CHECK(m.held());
    for (std::size_t i = 0; i < c.size(); ++i) CHECK(lock_commands(c[i]) == before[i]);
    // Not acquisitions or releases: nothing went to the nodes.
    CHECK(rs.stats().acquisitions.ok == acquisitions);
    CHECK(rs.stats().releases.ok == releases);

    REQUIRE(m.unlock(none).ok());
    CHECK(rs.stats().releases.ok == releases + 1);
    check_keys(c, name, std::nullopt);
    // The next acquisition is a new one, with a higher token.
    REQUIRE(m.lock(none).ok());
    CHECK(m.token() > token);
    CHECK(m.value() != value);
    CHECK(m.unlock(none).ok());
  }

  TEST_CASE("an unbalanced unlock reports not_held") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("unbalanced"), {.reentrant = true});
    CHECK(m.unlock(none).error == redsync::errc::not_held);  // never locked
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.lock(none).ok());
    CHECK(m.unlock(none).ok());
    CHECK(m.unlock(none).ok());
    CHECK(m.unlock(none).error == redsync::errc::not_held);
    CHECK(m.last_result().error == redsync::errc::not_held);
  }

  TEST_CASE("an inner unlock cancelled before its turn still takes its hold and leaves the lock held") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("cancelled-unlock");
    auto m = rs.new_mutex(name, {.expiry = 10s, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.lock(none).ok());
    std::stop_source stop;
    stop.request_stop();
    CHECK(m.unlock(redsync::context::cancellable(stop.get_token())).error == redsync::errc::cancelled);
    CHECK(m.held());
    check_keys(c, name, m.value());
    REQUIRE(m.unlock(none).ok());  // the last hold
    CHECK_FALSE(m.held());
    check_keys(c, name, std::nullopt);
    CHECK(m.unlock(none).error == redsync::errc::not_held);
  }

  TEST_CASE("another thread locking the same held Mutex is refused with already_held, async forms too") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("other-thread");
    auto m = rs.new_mutex(name, {.expiry = 10s, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    redsync::result locked, tried, future;
    std::thread other([&] {
      locked = m.lock(none);
      tried = m.try_lock(none);
      future = m.lock_future().get();
    });
    other.join();
    CHECK(locked.error == redsync::errc::already_held);
    CHECK(tried.error == redsync::errc::already_held);
    CHECK(future.error == redsync::errc::already_held);
    // The owner's single unlock still releases: the refusals added no hold.
    REQUIRE(m.unlock(none).ok());
    check_keys(c, name, std::nullopt);
  }

  TEST_CASE("without the option a held mutex still refuses a second lock with already_held") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("default");
    auto m = rs.new_mutex(name);
    REQUIRE(m.lock(none).ok());
    const auto r = m.lock(none);
    CHECK(r.error == redsync::errc::already_held);
    CHECK(r.error.message().find("mutex_options::reentrant") != std::string::npos);
    CHECK(m.unlock(none).ok());
    check_keys(c, name, std::nullopt);
  }

  TEST_CASE("a second Mutex of the same name in the same thread is a contender, not a re-entry") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("second-object");
    auto a = rs.new_mutex(name, {.expiry = 10s, .reentrant = true});
    auto b = rs.new_mutex(name, {.expiry = 10s, .tries = 2, .retry_delay = 10ms, .reentrant = true});
    REQUIRE(a.lock(none).ok());
    CHECK(b.try_lock(none).error == redsync::errc::busy);
    CHECK(b.lock(none).error == redsync::errc::busy);
    CHECK_FALSE(b.unlock(none).ok());  // b holds nothing: a's keys stay
    check_keys(c, name, a.value());
    CHECK(a.held());
    REQUIRE(a.unlock(none).ok());
  }

  TEST_CASE("auto-extension keeps a re-entered lock through several expiries until the last unlock") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("auto-extend");
    auto m = rs.new_mutex(name, {.expiry = 600ms, .auto_extend = true, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    const auto value = m.value();
    const auto token = m.token();
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.unlock(none).ok());  // an inner unlock: the watchdog goes on
    const auto first_until = m.until();
    std::this_thread::sleep_for(2s);  // more than three expiries
    CHECK(m.held());
    CHECK_FALSE(m.lost());
    CHECK(m.until() > first_until);
    CHECK(m.token() == token);
    check_keys(c, name, value);
    REQUIRE(m.lock(none).ok());  // still a re-entry after the extensions
    REQUIRE(m.unlock(none).ok());
    REQUIRE(m.unlock(none).ok());
    check_keys(c, name, value);
    REQUIRE(m.unlock(none).ok());  // the last
    CHECK_FALSE(m.held());
    check_keys(c, name, std::nullopt);
    // The watchdog stopped with it: nothing re-creates the key.
    std::this_thread::sleep_for(700ms);
    check_keys(c, name, std::nullopt);
  }

  TEST_CASE(
      "a re-entry after auto-extension reported the lock lost fails with lost, and the next lock is new") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("lost");
    auto m = rs.new_mutex(name, {.expiry = 600ms, .auto_extend = true, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.lock(none).ok());
    const auto value = m.value();
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).command({"DEL", name});
    REQUIRE(wait_until([&] { return m.lost(); }, 10s));
    // The owner still has unlocks to make: another thread may not start over.
    redsync::result other;
    std::thread t([&] { other = m.lock(none); });
    t.join();
    CHECK(other.error == redsync::errc::already_held);

    CHECK(m.lock(none).error == redsync::errc::lost);
    CHECK_FALSE(m.held());
    // Its two holds are still owed: nobody starts over, the owner included,
    // until its unlocks (the first reports the loss) are made.
    CHECK(m.lock(none).error == redsync::errc::lost);
    CHECK(m.unlock(none).error == redsync::errc::lost);
    CHECK(m.unlock(none).error == redsync::errc::not_held);
    const auto fresh = m.lock(none);
    REQUIRE_MESSAGE(fresh.ok(), fresh.describe());
    CHECK(m.value() != value);
    check_keys(c, name, m.value());
    REQUIRE(m.unlock(none).ok());
    check_keys(c, name, std::nullopt);
  }

  // Was a hole (attack review, F2): once the owner noticed a loss, its
  // remaining holds were forgotten, so another thread acquired afresh and
  // the owner's outer unlock released that thread's keys.
  TEST_CASE("after a loss another thread acquires only once the owner made every unlock it owes") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("owed");
    auto m = rs.new_mutex(name, {.expiry = 600ms, .auto_extend = true, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.lock(none).ok());
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).command({"DEL", name});
    REQUIRE(wait_until([&] { return m.lost(); }, 10s));
    CHECK(m.unlock(none).error == redsync::errc::lost);  // the inner unlock
    redsync::result other;
    std::thread([&] { other = m.lock(none); }).join();
    CHECK_MESSAGE(other.error == redsync::errc::already_held, other.describe());
    CHECK(m.unlock(none).error == redsync::errc::not_held);  // the outer one: nothing left to release
    std::thread([&] { other = m.lock(none); }).join();
    REQUIRE_MESSAGE(other.ok(), other.describe());
    check_keys(c, name, m.value());  // the other thread's keys stay
    REQUIRE(m.unlock(none).ok());
  }

  TEST_CASE("an unlock of a lost re-entered lock releases and reports lost; the outer one is not_held") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("lost-unlock");
    auto m = rs.new_mutex(name, {.expiry = 600ms, .auto_extend = true, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.lock(none).ok());
    for (std::size_t i = 0; i < c.size(); ++i) redis_client(c[i]).command({"DEL", name});
    REQUIRE(wait_until([&] { return m.lost(); }, 10s));
    CHECK(m.unlock(none).error == redsync::errc::lost);
    CHECK(m.unlock(none).error == redsync::errc::not_held);
    REQUIRE(m.lock(none).ok());
    REQUIRE(m.unlock(none).ok());
  }

  TEST_CASE("a re-entry after the validity passed without auto-extension fails with expired") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("expired");
    auto m = rs.new_mutex(name, {.expiry = 500ms, .reentrant = true});
    REQUIRE(m.lock(none).ok());
    const auto value = m.value();
    REQUIRE(wait_until([&] { return !m.held(); }, 5s));
    CHECK(m.lock(none).error == redsync::errc::expired);
    // The one hold is owed until the owner's unlock pays it (releasing what
    // is left of the keys, which outlive the validity by the drift, or
    // finding them expired); then the next lock is a new acquisition.
    const auto paid = m.unlock(none);
    CHECK_MESSAGE((paid.ok() || paid.error == redsync::errc::expired), paid.describe());
    const auto fresh = m.lock(none);
    REQUIRE_MESSAGE(fresh.ok(), fresh.describe());
    CHECK(m.value() != value);
    REQUIRE(m.unlock(none).ok());
    check_keys(c, name, std::nullopt);
  }

  TEST_CASE("destroying a Mutex held several times releases the lock on every node") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("destroyed");
    {
      auto m = rs.new_mutex(name, {.expiry = 10s, .reentrant = true});
      REQUIRE(m.lock(none).ok());
      REQUIRE(m.lock(none).ok());
    }
    CHECK(wait_until(
        [&] {
          for (std::size_t i = 0; i < c.size(); ++i)
            if (redis_client(c[i]).exists(name)) return false;
          return true;
        },
        5s));
  }
}
