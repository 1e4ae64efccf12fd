// Pins down the test harness itself: the redis_server / cluster fixtures and
// the redis_client used by every other test in this suite.
#include <doctest/doctest.h>

#include <hiredis/hiredis.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>

#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

using namespace std::chrono_literals;
using namespace redsync::test;
using kind = redis_client::reply::kind;

namespace {

// A raw, unauthenticated connection; nullptr-free: returns whether it connected.
bool tcp_connects(int port) {
  timeval tv{0, 200'000};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  bool ok = c != nullptr && c->err == 0;
  redisFree(c);
  return ok;
}

bool process_gone(pid_t pid) {
  return ::kill(pid, 0) == -1 && errno == ESRCH;
}

}  // namespace

TEST_SUITE("harness") {
  TEST_CASE("harness: a server starts without persistence and answers PING") {
    redis_server server;
    REQUIRE(server.running());
    CHECK(server.port() > 0);
    CHECK(server.address() == "127.0.0.1:" + std::to_string(server.port()));
    CHECK(server.uri() == "redis://127.0.0.1:" + std::to_string(server.port()));
    CHECK(server.unix_path().empty());
    CHECK(server.pid() > 0);
    CHECK_FALSE(server.paused());

    redis_client client(server);
    auto pong = client.command({"PING"});
    CHECK(pong.type == kind::status);
    CHECK(pong.str == "PONG");
    auto save = client.command({"CONFIG", "GET", "save"});
    REQUIRE(save.type == kind::array);
    REQUIRE(save.elements.size() == 2);
    CHECK(save.elements[1].str.empty());
    CHECK(client.info_field("persistence", "aof_enabled") == "0");
  }

  TEST_CASE("harness: the client reads keys, TTLs, sizes and command counts") {
    redis_server server;
    redis_client client(server);
    const std::string key = "harness:client:key";
    CHECK_FALSE(client.get(key).has_value());
    CHECK(client.pttl(key) == -2);
    CHECK_FALSE(client.exists(key));
    CHECK(client.dbsize() == 0);

    client.reset_stats();
    CHECK(client.calls("set") == 0);
    CHECK(client.command({"SET", key, "v", "PX", "60000"}).str == "OK");
    CHECK(client.get(key) == "v");
    CHECK(client.exists(key));
    CHECK(client.pttl(key) > 50'000);
    CHECK(client.pttl(key) <= 60'000);
    CHECK(client.dbsize() == 1);
    CHECK(client.calls("set") == 1);
    CHECK(client.calls("SET") == 1);
    CHECK(client.calls("evalsha") == 0);
    CHECK(client.command({"EVAL", "return 1", "0"}).integer == 1);
    CHECK(client.calls("eval") == 1);

    auto err = client.command({"NOSUCHCOMMAND"});
    CHECK(err.type == kind::error);
    CHECK(client.info_field("clients", "connected_clients") == "1");
    CHECK(client.info_field("clients", "no_such_field").empty());

    client.flushall();
    CHECK(client.dbsize() == 0);
  }

  TEST_CASE("harness: kill makes the port refuse connections") {
    redis_server server;
    const int port = server.port();
    const pid_t pid = server.pid();
    REQUIRE(tcp_connects(port));
    server.kill();
    CHECK_FALSE(server.running());
    CHECK(server.pid() == -1);
    CHECK(process_gone(pid));
    CHECK_FALSE(tcp_connects(port));
    CHECK_THROWS_AS(redis_client{server}, std::runtime_error);
    CHECK_NOTHROW(server.kill());  // idempotent
  }

  TEST_CASE("harness: pause makes a command time out and resume brings the answer back") {
    redis_server server;
    redis_client client(server, client_options{.timeout = 200ms});
    REQUIRE(client.command({"SET", "harness:pause", "1"}).str == "OK");

    server.pause();
    CHECK(server.paused());
    CHECK(server.running());
    const auto started = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(client.command({"GET", "harness:pause"}), std::runtime_error);
    CHECK(std::chrono::steady_clock::now() - started >= 150ms);

    server.resume();
    CHECK_FALSE(server.paused());
    CHECK(client.get("harness:pause") == "1");  // reconnects after the timeout
  }

  TEST_CASE("harness: restart comes back on the same port with an empty dataset") {
    redis_server server;
    const int port = server.port();
    const pid_t old_pid = server.pid();
    {
      redis_client client(server);
      client.command({"SET", "harness:restart", "1"});
      REQUIRE(client.dbsize() == 1);
    }
    server.kill();
    server.restart();
    CHECK(server.running());
    CHECK(server.port() == port);
    CHECK(server.pid() != old_pid);
    redis_client client(server);
    CHECK(client.dbsize() == 0);

    server.pause();
    server.restart();  // kills first, even when paused
    CHECK(server.port() == port);
    CHECK_FALSE(server.paused());
    CHECK(redis_client(server).command({"PING"}).str == "PONG");
  }

  TEST_CASE("harness: restart keeps the data when extra_args enable the AOF") {
    redis_server server(config{.extra_args = {"--appendonly", "yes", "--appendfsync", "always"}});
    redis_client(server).command({"SET", "harness:aof", "kept"});
    server.restart();
    CHECK(redis_client(server).get("harness:aof") == "kept");
  }

  TEST_CASE("harness: a password-protected server refuses unauthenticated commands") {
    redis_server server(config{.password = "s3cret"});
    CHECK(server.uri() == "redis://:s3cret@127.0.0.1:" + std::to_string(server.port()));

    timeval tv{1, 0};
    redisContext* raw = redisConnectWithTimeout("127.0.0.1", server.port(), tv);
    REQUIRE(raw != nullptr);
    REQUIRE(raw->err == 0);
    auto* r = static_cast<redisReply*>(redisCommand(raw, "GET harness:auth"));
    REQUIRE(r != nullptr);
    CHECK(r->type == REDIS_REPLY_ERROR);
    CHECK(std::string(r->str, r->len).rfind("NOAUTH", 0) == 0);
    freeReplyObject(r);
    redisFree(raw);

    redis_client client(server);  // AUTHs with the server's password
    CHECK(client.command({"PING"}).str == "PONG");
  }

  TEST_CASE("harness: a unix socket server answers through the socket") {
    redis_server server(config{.unix_socket = true});
    REQUIRE_FALSE(server.unix_path().empty());
    CHECK(server.unix_uri() == "unix://" + server.unix_path());
    CHECK(std::filesystem::is_socket(server.unix_path()));

    redis_client over_unix(server, client_options{.unix_socket = true});
    CHECK(over_unix.command({"SET", "harness:unix", "u"}).str == "OK");
    redis_client over_tcp(server);
    CHECK(over_tcp.get("harness:unix") == "u");
    CHECK(over_unix.info_field("clients", "connected_clients") == "2");
  }

  TEST_CASE("harness: a bad argument makes the constructor throw with the server log") {
    try {
      redis_server server(config{.extra_args = {"--no-such-directive", "1"}});
      FAIL("constructor should have thrown");
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      CHECK(what.find("exited during startup") != std::string::npos);
      CHECK(what.find("no-such-directive") != std::string::npos);
    }
  }

  TEST_CASE("harness: the destructor leaves no process and no directory behind") {
    pid_t pid = -1;
    pid_t paused_pid = -1;
    std::string dir;
    {
      redis_server server;
      redis_server paused;
      pid = server.pid();
      dir = server.dir();
      paused.pause();
      paused_pid = paused.pid();
      REQUIRE(pid > 0);
      REQUIRE(::kill(pid, 0) == 0);
      REQUIRE(std::filesystem::exists(dir));
    }
    CHECK(process_gone(pid));
    CHECK(process_gone(paused_pid));
    CHECK_FALSE(std::filesystem::exists(dir));
  }

  TEST_CASE("harness: stop shuts a server down gracefully") {
    redis_server server;
    const pid_t pid = server.pid();
    server.stop();
    CHECK_FALSE(server.running());
    CHECK(process_gone(pid));
    CHECK(server.log_tail(50).find("ready to exit") != std::string::npos);
  }

  TEST_CASE("harness: a cluster of 5 has 5 distinct ports and starts quickly") {
    const auto started = std::chrono::steady_clock::now();
    cluster nodes(5);
    const auto elapsed = std::chrono::steady_clock::now() - started;
    MESSAGE("5 servers up in " << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
                               << " ms");
    CHECK(elapsed < 5s);  // normally well under a second; generous for loaded CI machines
    REQUIRE(nodes.size() == 5);

    std::set<int> ports;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      ports.insert(nodes[i].port());
      CHECK(redis_client(nodes[i]).command({"PING"}).str == "PONG");
    }
    CHECK(ports.size() == 5);
    CHECK(nodes.uris().size() == 5);
    CHECK(nodes.uris()[2] == nodes[2].uri());

    nodes[1].kill();
    nodes[3].pause();
    CHECK(wait_until([&] { return !tcp_connects(nodes[1].port()); }, 1000ms));
    CHECK(nodes[3].paused());
    nodes[3].resume();
    nodes[1].restart();
    CHECK(redis_client(nodes[1]).command({"PING"}).str == "PONG");
  }

  TEST_CASE("harness: wait_until returns as soon as the condition holds, false after the bound") {
    int calls = 0;
    CHECK(wait_until([&] { return ++calls == 3; }, 1000ms));
    CHECK(calls == 3);
    const auto started = std::chrono::steady_clock::now();
    CHECK_FALSE(wait_until([] { return false; }, 50ms));
    CHECK(std::chrono::steady_clock::now() - started >= 50ms);
  }

}  // TEST_SUITE("harness")
