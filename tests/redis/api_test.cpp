// The public API's own contracts (lib/mutex.cpp, lib/error.cpp, guard): a
// moved-from Mutex, the asynchronous and future forms, how outcomes and
// tokens print, how a result is compared with an error, what a failed lock
// says, and the constructors' overloads.

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_server.hpp"

#include <redsync/fmt.hpp>
#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <future>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;

// A guard is made on purpose, never by conversion from a Mutex.
static_assert(!std::is_convertible_v<redsync::Mutex&, redsync::guard>);
// One token type everywhere: the observer's event carries what token() returns.
static_assert(std::is_same_v<decltype(redsync::acquire_event::token), redsync::fencing_token>);
static_assert(std::is_same_v<decltype(std::declval<redsync::Mutex&>().token()), redsync::fencing_token>);

TEST_SUITE("api") {
  TEST_CASE("a moved-from Mutex throws a logic_error naming the mistake, and works again once assigned") {
    cluster c(1);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("moved"));
    redsync::Mutex taken = std::move(m);
    CHECK_FALSE(m.has_state());
    CHECK(taken.has_state());
    CHECK_THROWS_WITH_AS(m.lock(redsync::context{}), doctest::Contains("moved-from Mutex"), std::logic_error);
    CHECK_THROWS_AS(m.try_lock(redsync::context{}), std::logic_error);
    CHECK_THROWS_AS(m.unlock(redsync::context{}), std::logic_error);
    CHECK_THROWS_AS(m.extend(), std::logic_error);
    CHECK_THROWS_AS(m.valid(), std::logic_error);
    CHECK_THROWS_AS(m.lock(), std::logic_error);
    CHECK_THROWS_AS(m.try_lock(), std::logic_error);
    CHECK_THROWS_AS(m.lock_async({}, [](redsync::result) {}), std::logic_error);
    CHECK_THROWS_AS(m.valid_future(), std::logic_error);
    CHECK_THROWS_AS((void)m.held(), std::logic_error);
    CHECK_THROWS_AS((void)m.value(), std::logic_error);
    CHECK_THROWS_AS((void)m.token(), std::logic_error);
    CHECK(m.name().empty());
    CHECK(m.names().empty());
    m.unlock();  // noexcept: does nothing
    m = rs.new_mutex(unique_name("moved-again"));
    CHECK(m.has_state());
    CHECK(m.try_lock(redsync::context{}).ok());
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("try_lock_future, valid_future and valid_async report what their blocking forms would") {
    cluster c(3);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("futures");
    auto m = rs.new_mutex(name);
    auto other = rs.new_mutex(name);
    REQUIRE(m.try_lock_future().get().ok());
    CHECK(m.valid_future().get().ok());
    std::promise<redsync::result> checked;
    m.valid_async({}, [&](redsync::result r) { checked.set_value(std::move(r)); });
    CHECK(checked.get_future().get().ok());
    CHECK(other.try_lock_future().get().error == redsync::errc::busy);
    CHECK(other.valid_future().get().error == redsync::errc::taken);  // its value lost to ours
    REQUIRE(m.unlock(redsync::context{}).ok());
    CHECK(m.valid_future().get().error == redsync::errc::expired);
  }

  TEST_CASE("errc, node_status and result print by name through operator<< and {fmt}") {
    cluster c(1);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    auto m = rs.new_mutex(unique_name("print"));
    auto r = m.try_lock(redsync::context{});
    REQUIRE(r.ok());
    std::ostringstream out;
    out << redsync::errc::no_quorum << ' ' << redsync::node_status::excluded << ' ' << r;
    CHECK(out.str() == "no_quorum excluded " + r.describe());
    CHECK(fmt::format("{}|{:>6}|{}", redsync::errc::busy, redsync::node_status::ok, r) ==
          "busy|    ok|" + r.describe());
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a lock refused only because fresh nodes do not vote yet says so in its message") {
    cluster c(3);
    // The restart guard on (the default): records repaired just now do not
    // count for one guard window. (Brand-new records, which no node has a
    // counter in, count at once: node_trust.hpp, "Never used".)
    prime_records(c.uris());
    stamp_records_now(c);
    redsync::Redsync rs(c.uris(), {.restart_guard_window = 30s});
    auto m = rs.new_mutex(unique_name("guarded"), {.expiry = 1s, .tries = 1});
    auto r = m.try_lock(redsync::context{});
    REQUIRE(r.error == redsync::errc::no_quorum);
    REQUIRE(r.nodes_with(redsync::node_status::excluded).size() >= 2);
    CHECK_MESSAGE(r.describe().find("do not vote yet (restart guard") != std::string::npos, r.describe());
    CHECK_THROWS_WITH(m.lock(), doctest::Contains("do not vote yet"));
  }

  TEST_CASE("a Redsync is made from 1, 2, 3 or 5 URIs written in place as string literals") {
    // Two literals used to be ambiguous (a vector's iterator-pair
    // constructor); these lines are the test: they must compile. The nodes
    // are never contacted (connections open lazily).
    redsync::Redsync one({"redis://127.0.0.1:1"});
    redsync::Redsync two({"redis://127.0.0.1:1", "redis://127.0.0.1:2"});
    redsync::Redsync three({"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"});
    redsync::Redsync five({"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3",
                           "redis://127.0.0.1:4", "redis://127.0.0.1:5"});
    redsync::Redsync two_with_options({"redis://127.0.0.1:1", "redis://127.0.0.1:2"}, {.pool_size = 2});
    CHECK(one.node_count() == 1);
    CHECK(two.node_count() == 2);
    CHECK(two.addresses() == std::vector<std::string>{"127.0.0.1:1", "127.0.0.1:2"});
    CHECK(three.node_count() == 3);
    CHECK(five.node_count() == 5);
    CHECK(two_with_options.quorum() == 2);
    // The other forms still choose their own constructors.
    const std::vector<std::string> uris{"redis://127.0.0.1:1", "redis://127.0.0.1:2"};
    CHECK(redsync::Redsync(uris).node_count() == 2);
    CHECK(
        redsync::Redsync({redsync::node_options{.port = 1}, redsync::node_options{.port = 2}}).node_count() ==
        2);
    CHECK_THROWS_AS(redsync::Redsync({"redis://127.0.0.1:1", "redis://127.0.0.1:1"}), redsync::config_error);
  }

  TEST_CASE("a fencing token prints as its number through operator<< and {fmt}, from a Mutex and an event") {
    cluster c(1);
    struct token_observer : redsync::observer {
      std::promise<std::string> printed;
      void on_acquire(const redsync::acquire_event& e) override {
        std::ostringstream out;
        out << e.token;
        printed.set_value(out.str());
      }
    };
    auto obs = std::make_shared<token_observer>();
    redsync::Redsync rs(c.uris(), fresh_nodes({.observer = obs}));
    auto m = rs.new_mutex(unique_name("print-token"));
    REQUIRE(m.lock(redsync::context{}).ok());
    const auto t = m.token();
    REQUIRE(t.value > 0);
    std::ostringstream out;
    out << "token " << t;
    CHECK(out.str() == "token " + std::to_string(t.value));
    CHECK(obs->printed.get_future().get() == std::to_string(t.value));
    CHECK(fmt::format("{}", t) == std::to_string(t.value));
    CHECK(fmt::format("{:>24}|{:x}", t, redsync::fencing_token{255}) == fmt::format("{:>24}|ff", t.value));
    std::ostringstream none;
    none << redsync::fencing_token{};
    CHECK(none.str() == "0");
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a result is compared with a specific error by is() or by error ==") {
    cluster c(1);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("is");
    auto holder = rs.new_mutex(name);
    auto other = rs.new_mutex(name);
    const auto ok = holder.try_lock(redsync::context{});
    REQUIRE(ok.ok());
    CHECK_FALSE(ok.is(redsync::errc::busy));
    CHECK_FALSE(ok.is(redsync::errc{}));  // success is ok(), never an error
    const auto r = other.try_lock(redsync::context{});
    CHECK(r.is(redsync::errc::busy));
    CHECK(r.error == redsync::errc::busy);  // the same test, spelled out
    CHECK_FALSE(r.is(redsync::errc::no_quorum));
    CHECK(rs.new_mutex(unique_name("is-idle")).unlock(redsync::context{}).is(redsync::errc::not_held));
    // An error of another category with the same number is not ours.
    redsync::result foreign;
    foreign.error = std::make_error_code(std::errc::operation_not_permitted);  // 1, as errc::busy
    CHECK_FALSE(foreign.is(redsync::errc::busy));
    CHECK(holder.unlock(redsync::context{}).ok());
  }

  TEST_CASE("a lock_error says its reason once: what() is the outcome's describe()") {
    redsync::result r;
    r.error = redsync::errc::busy;
    r.attempts = 2;
    r.elapsed = 1500us;
    redsync::node_result n;
    n.address = "127.0.0.1:1";
    n.status = redsync::node_status::taken;
    r.nodes.push_back(n);
    const redsync::lock_error e(r);
    CHECK(std::string(e.what()) ==
          "lock is held by another holder after 2 attempts in 1.500 ms "
          "[127.0.0.1:1 taken 0us]");
    CHECK(e.code() == redsync::errc::busy);
    CHECK(e.outcome().describe() == e.what());

    // The same from a real lock() that gives up.
    cluster c(1);
    redsync::Redsync rs(c.uris(), fresh_nodes());
    const auto name = unique_name("lock-error");
    auto holder = rs.new_mutex(name);
    REQUIRE(holder.lock(redsync::context{}).ok());
    auto other = rs.new_mutex(name, {.tries = 2, .retry_delay = [](int) { return 1ms; }});
    std::string what;
    try {
      other.lock();
    } catch (const redsync::lock_error& err) {
      what = err.what();
      CHECK(what == err.outcome().describe());
    }
    const std::string reason = "lock is held by another holder";
    CHECK(what.starts_with(reason + " after 2 attempts in "));
    CHECK(what.find(reason, reason.size()) == std::string::npos);  // once
    CHECK(holder.unlock(redsync::context{}).ok());
  }
}
