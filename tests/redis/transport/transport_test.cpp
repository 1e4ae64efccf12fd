// The transport layer (event_loop, node_pool, connection) against real
// redis-server processes: round trips, pipelining order, handshake, timeouts
// with late replies, node death, backoff and shutdown.
#include <doctest/doctest.h>

#include "transport/event_loop.hpp"
#include "transport/node_pool.hpp"

#include <poll.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

using namespace std::chrono_literals;
using redsync::node_options;
using redsync::redsync_options;
using redsync::detail::command_result;
using redsync::detail::encode_command;
using redsync::detail::event_loop;
using redsync::detail::node_pool;
using redsync::detail::reply;
using redsync::detail::transport_status;
using namespace redsync::test;
using std::chrono::steady_clock;

namespace {

node_options tcp_node(const redis_server& s) {
  node_options n;
  n.host = "127.0.0.1";
  n.port = s.port();
  return n;
}

// A node_pool on an owned event_loop; every pool call is made on the loop
// thread, results come back through futures waited on with a bound.
class pool_fixture {
 public:
  explicit pool_fixture(node_options node, redsync_options options = {})
      : pool_(std::make_unique<node_pool>(loop_.loop(), std::move(node), options)) {}
  ~pool_fixture() { close(); }

  std::future<command_result> send(std::vector<std::string> argv, std::chrono::milliseconds timeout = 2000ms,
                                   std::uint64_t route = 0) {
    auto promise = std::make_shared<std::promise<command_result>>();
    auto future = promise->get_future();
    std::vector<std::string_view> views(argv.begin(), argv.end());
    auto wire = encode_command(views);
    loop_.post([this, wire, timeout, route, promise] {
      pool_->send(route, wire, timeout, [promise](command_result&& r) { promise->set_value(std::move(r)); });
    });
    return future;
  }

  command_result call(std::vector<std::string> argv, std::chrono::milliseconds timeout = 2000ms,
                      std::uint64_t route = 0) {
    return get(send(std::move(argv), timeout, route), timeout + 5s);
  }

  static command_result get(std::future<command_result> f, std::chrono::milliseconds bound = 10s) {
    REQUIRE(f.wait_for(bound) == std::future_status::ready);
    return f.get();
  }

  // Returns once everything posted so far has run and its writes went out:
  // a send runs in one loop pass and is written from the idle phase of the
  // next, so two round trips through the loop cover both.
  void settle() {
    loop_.run_sync([] {});
    loop_.run_sync([] {});
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    std::promise<void> done;
    loop_.run_sync([&] { pool_->close([&] { done.set_value(); }); });
    REQUIRE(done.get_future().wait_for(10s) == std::future_status::ready);
  }

  event_loop& loop() { return loop_; }
  node_pool& pool() { return *pool_; }

 private:
  event_loop loop_{nullptr};
  std::unique_ptr<node_pool> pool_;
  bool closed_ = false;
};

bool is_ok(const command_result& r) {
  return r.status == transport_status::ok;
}

}  // namespace

TEST_SUITE_BEGIN("transport");

TEST_CASE("a pool round-trips PING, SET and GET over TCP") {
  redis_server server;
  pool_fixture f(tcp_node(server));
  auto ping = f.call({"PING"});
  REQUIRE(is_ok(ping));
  CHECK(ping.value.type == reply::kind::status);
  CHECK(ping.value.str == "PONG");
  CHECK(ping.latency > 0us);
  CHECK(f.call({"SET", "transport:tcp", "v1"}).value.str == "OK");
  auto get = f.call({"GET", "transport:tcp"});
  CHECK(get.value.type == reply::kind::string);
  CHECK(get.value.str == "v1");
  CHECK(f.call({"GET", "transport:tcp:missing"}).value.type == reply::kind::nil);
  redis_client client(server);
  CHECK(client.get("transport:tcp") == "v1");
}

TEST_CASE("a pool resolves a host name before connecting") {
  redis_server server;
  node_options n = tcp_node(server);
  n.host = "localhost";  // may resolve to ::1 first, where nothing listens
  pool_fixture f(n);
  auto r = f.call({"PING"});
  CHECK(is_ok(r));
  CHECK(r.value.str == "PONG");
}

TEST_CASE("a pool round-trips commands over a unix socket") {
  redis_server server(config{.unix_socket = true});
  node_options n;
  n.unix_path = server.unix_path();
  pool_fixture f(n);
  CHECK(f.call({"SET", "transport:unix", "u"}).value.str == "OK");
  CHECK(f.call({"GET", "transport:unix"}).value.str == "u");
}

TEST_CASE("pipelined commands on one route are answered in send order") {
  redis_server server;
  pool_fixture f(tcp_node(server));
  constexpr int n = 2000;
  std::vector<long long> seen;
  seen.reserve(n);
  std::promise<void> all;
  auto wire = encode_command({"INCR", "transport:pipeline"});
  f.loop().post([&] {
    for (int i = 0; i < n; ++i) {
      f.pool().send(7, wire, 5s, [&, i](command_result&& r) {
        seen.push_back(r.status == transport_status::ok ? r.value.integer : -1);
        if (i == n - 1) all.set_value();
      });
    }
  });
  REQUIRE(all.get_future().wait_for(20s) == std::future_status::ready);
  REQUIRE(seen.size() == n);
  bool in_order = true;
  for (int i = 0; i < n; ++i) in_order = in_order && seen[static_cast<std::size_t>(i)] == i + 1;
  CHECK(in_order);
}

TEST_CASE("commands spread over a pool's connections by route all get their own replies") {
  redis_server server;
  redsync_options o;
  o.pool_size = 3;
  pool_fixture f(tcp_node(server), o);
  std::vector<std::future<command_result>> futures;
  for (int i = 0; i < 30; ++i) {
    futures.push_back(f.send({"ECHO", std::to_string(i)}, 2000ms, static_cast<std::uint64_t>(i)));
  }
  for (int i = 0; i < 30; ++i) {
    auto r = pool_fixture::get(std::move(futures[static_cast<std::size_t>(i)]));
    CHECK(r.value.str == std::to_string(i));
  }
  redis_client client(server);
  CHECK(client.info_field("clients", "connected_clients") == "4");  // 3 + this client
}

TEST_CASE("AUTH with the right password lets commands through") {
  redis_server server(config{.password = "s3cret"});
  node_options n = tcp_node(server);
  n.password = "s3cret";
  pool_fixture f(n);
  auto r = f.call({"SET", "transport:auth", "yes"});
  CHECK(r.value.str == "OK");
  CHECK(r.error.empty());
}

TEST_CASE("a missing password yields a NOAUTH error reply, not a transport failure") {
  redis_server server(config{.password = "s3cret"});
  pool_fixture f(tcp_node(server));
  auto r = f.call({"GET", "transport:noauth"});
  REQUIRE(is_ok(r));
  CHECK(r.value.is_error());
  CHECK(r.value.str.rfind("NOAUTH", 0) == 0);
}

TEST_CASE("a wrong password surfaces the WRONGPASS text with the command's error reply") {
  redis_server server(config{.password = "s3cret"});
  node_options n = tcp_node(server);
  n.password = "wrong";
  pool_fixture f(n);
  auto r = f.call({"GET", "transport:wrongpass"});
  REQUIRE(is_ok(r));
  CHECK(r.value.is_error());
  CHECK(r.error.find("AUTH failed") != std::string::npos);
  CHECK(r.error.find("WRONGPASS") != std::string::npos);
  // Still in order on the same connection: the next command fails the same way.
  auto again = f.call({"PING"});
  CHECK(again.value.is_error());
  CHECK(again.error.find("WRONGPASS") != std::string::npos);
}

TEST_CASE("SELECT puts the pool's keys in the configured database") {
  redis_server server;
  node_options n = tcp_node(server);
  n.db = 3;
  pool_fixture f(n);
  CHECK(f.call({"SET", "transport:db", "three"}).value.str == "OK");
  redis_client client(server);
  CHECK_FALSE(client.exists("transport:db"));
  REQUIRE(client.command({"SELECT", "3"}).str == "OK");
  CHECK(client.get("transport:db") == "three");
}

TEST_CASE("a paused server times a command out, and its late reply is not given to the next command") {
  redis_server server;
  pool_fixture f(tcp_node(server));
  REQUIRE(f.call({"PING"}).value.str == "PONG");  // connected before the pause
  server.pause();
  const auto start = steady_clock::now();
  auto r = f.call({"ECHO", "first"}, 200ms);
  const auto took = steady_clock::now() - start;
  CHECK(r.status == transport_status::timeout);
  CHECK(took >= 190ms);
  CHECK(took < 1500ms);
  server.resume();
  auto next = f.call({"ECHO", "second"});
  REQUIRE(is_ok(next));
  CHECK(next.value.str == "second");
}

TEST_CASE("commands on the same route run in send order across a pause") {
  redis_server server;
  pool_fixture f(tcp_node(server));
  REQUIRE(is_ok(f.call({"PING"}, 2000ms, 42)));
  server.pause();
  auto set = f.send({"SET", "transport:order", "first"}, 150ms, 42);
  auto del = f.send({"SET", "transport:order", "second"}, 10000ms, 42);
  CHECK(pool_fixture::get(std::move(set)).status == transport_status::timeout);
  CHECK(del.wait_for(100ms) == std::future_status::timeout);  // still waiting
  server.resume();
  auto second = pool_fixture::get(std::move(del));
  CHECK(is_ok(second));
  redis_client client(server);
  CHECK(client.get("transport:order") == "second");
}

TEST_CASE("a command larger than the socket buffers is written in pieces and arrives whole, in order") {
  // With the server paused, the kernel takes only a few MiB of a 32 MiB
  // command: the rest of it goes out later, and the next command must queue
  // behind that tail rather than be written into the middle of it.
  redis_server server;
  pool_fixture f(tcp_node(server));
  REQUIRE(is_ok(f.call({"PING"})));
  std::string big(32u << 20, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + (i / 4096) % 26);
  server.pause();
  auto set = f.send({"SET", "transport:big", big}, 30000ms);
  f.settle();
  auto echo = f.send({"ECHO", "after"}, 30000ms);
  f.settle();
  server.resume();
  CHECK(is_ok(pool_fixture::get(std::move(set), 30s)));
  const auto after = pool_fixture::get(std::move(echo), 30s);
  REQUIRE(is_ok(after));
  CHECK(after.value.str == "after");
  const auto back = f.call({"GET", "transport:big"}, 10000ms);
  REQUIRE(is_ok(back));
  CHECK(back.value.str.size() == big.size());
  const bool same_bytes = back.value.str == big;  // not printed: 32 MiB
  CHECK(same_bytes);
}

TEST_CASE("a short timeout behind a long one fires first") {
  redis_server server;
  pool_fixture f(tcp_node(server));
  REQUIRE(is_ok(f.call({"PING"})));
  server.pause();
  const auto start = steady_clock::now();
  auto slow = f.send({"ECHO", "slow"}, 1500ms);
  auto fast = f.send({"ECHO", "fast"}, 100ms);
  REQUIRE(fast.wait_for(1000ms) == std::future_status::ready);
  CHECK(fast.get().status == transport_status::timeout);
  CHECK(steady_clock::now() - start < 1000ms);
  CHECK(slow.wait_for(0ms) == std::future_status::timeout);
  CHECK(pool_fixture::get(std::move(slow)).status == transport_status::timeout);
  CHECK(steady_clock::now() - start >= 1450ms);
  server.resume();
  CHECK(f.call({"ECHO", "after"}).value.str == "after");
}

TEST_CASE("a connection silent for stall_close with only timed-out commands is replaced") {
  redis_server server;
  pool_fixture f(tcp_node(server));
  REQUIRE(is_ok(f.call({"PING"}, 400ms)));  // 10 x 400 ms < 5 s
  redis_client client(server);
  const auto before = std::stoll(client.info_field("stats", "total_connections_received"));
  server.pause();
  CHECK(f.call({"ECHO", "stale"}, 100ms).status == transport_status::timeout);
  // stall_close is max(10 x 100 ms, 5 s): the dead-looking connection is
  // closed 5 s after its last byte. This waits for time itself to pass.
  std::this_thread::sleep_for(6s);
  server.resume();
  auto fresh = f.call({"ECHO", "fresh"});
  REQUIRE(is_ok(fresh));
  CHECK(fresh.value.str == "fresh");
  const auto after = std::stoll(client.info_field("stats", "total_connections_received"));
  CHECK(after == before + 1);
}

TEST_CASE(
    "killing a server fails its commands in flight as unreachable, and the pool reconnects after a restart") {
  redis_server server;
  pool_fixture f(tcp_node(server));
  REQUIRE(is_ok(f.call({"PING"})));
  server.pause();
  auto in_flight = f.send({"ECHO", "lost"}, 10000ms);
  // Kill only once the command is on the wire: a kill that wins the race
  // with the send makes it a fresh connect to a dead node instead.
  f.settle();
  server.kill();
  const auto r = pool_fixture::get(std::move(in_flight), 5s);
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(r.error.find("connection lost") != std::string::npos, r.error);
  server.restart();
  // The drop was not a failed connect, so the next send reconnects at once.
  auto back = f.call({"ECHO", "back"});
  CHECK_MESSAGE(is_ok(back), back.error);
  CHECK(back.value.str == "back");
}

TEST_CASE("a refused connection fails quickly as unreachable, then fails fast during backoff") {
  redis_server server;
  const int port = server.port();
  server.kill();
  node_options n;
  n.port = port;
  redsync_options o;
  o.reconnect_backoff_min = 300ms;
  o.reconnect_backoff_max = 1000ms;
  pool_fixture f(n, o);

  const auto start = steady_clock::now();
  auto first = f.call({"PING"});
  CHECK(first.status == transport_status::unreachable);
  CHECK(first.error.find("connection refused") != std::string::npos);
  CHECK(steady_clock::now() - start < 1000ms);

  // Within the 300 ms backoff: no connect attempt, and the callback is
  // deferred rather than run inside send().
  std::atomic<bool> inside_send{false};
  std::atomic<bool> ran_inside{false};
  std::promise<command_result> p;
  f.loop().post([&] {
    inside_send = true;
    f.pool().send(0, encode_command({"PING"}), 2s, [&](command_result&& r) {
      ran_inside = inside_send.load();
      p.set_value(std::move(r));
    });
    inside_send = false;
  });
  auto fast = pool_fixture::get(p.get_future(), 2s);
  CHECK_FALSE(ran_inside.load());
  CHECK(fast.status == transport_status::unreachable);
  CHECK(fast.error.find("node down: reconnect in") != std::string::npos);
  CHECK(fast.error.find("connection refused") != std::string::npos);

  server.restart();
  CHECK(wait_until([&] { return is_ok(f.call({"PING"}, 500ms)); }, 5000ms));
}

TEST_CASE("a hung node does not delay another pool's replies") {
  redis_server hung;
  redis_server healthy;
  pool_fixture a(tcp_node(hung));
  pool_fixture b(tcp_node(healthy));
  REQUIRE(is_ok(a.call({"PING"})));
  REQUIRE(is_ok(b.call({"PING"})));
  hung.pause();
  auto stuck = a.send({"PING"}, 3000ms);
  const auto start = steady_clock::now();
  auto quick = b.call({"PING"});
  CHECK(is_ok(quick));
  CHECK(steady_clock::now() - start < 500ms);
  CHECK(stuck.wait_for(0ms) == std::future_status::timeout);
  hung.resume();
  CHECK(pool_fixture::get(std::move(stuck)).status != transport_status::shutdown);
}

TEST_CASE("close with commands in flight completes them with shutdown and the loop closes cleanly") {
  redis_server server;
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  std::promise<void> started;
  std::thread runner;
  std::vector<std::future<command_result>> results;
  {
    auto events = std::make_unique<event_loop>(&loop);
    node_pool pool(&loop, tcp_node(server), redsync_options{.pool_size = 2});
    // Keep the external loop alive until we are done with it.
    uv_async_t keepalive;
    uv_async_init(&loop, &keepalive,
                  [](uv_async_t* h) { uv_close(reinterpret_cast<uv_handle_t*>(h), nullptr); });
    runner = std::thread([&] { uv_run(&loop, UV_RUN_DEFAULT); });

    std::promise<command_result> warm;
    events->post([&] {
      pool.send(0, encode_command({"PING"}), 2s, [&](command_result&& r) { warm.set_value(std::move(r)); });
    });
    REQUIRE(is_ok(pool_fixture::get(warm.get_future())));
    server.pause();

    std::vector<std::shared_ptr<std::promise<command_result>>> promises;
    for (int i = 0; i < 6; ++i) {
      promises.push_back(std::make_shared<std::promise<command_result>>());
      results.push_back(promises.back()->get_future());
    }
    std::promise<void> closed;
    events->run_sync([&] {
      for (int i = 0; i < 6; ++i) {
        auto p = promises[static_cast<std::size_t>(i)];
        pool.send(static_cast<std::uint64_t>(i), encode_command({"PING"}), 10s,
                  [p](command_result&& r) { p->set_value(std::move(r)); });
      }
      CHECK(events->on_loop_thread());
      pool.close([&] { closed.set_value(); });
    });
    REQUIRE(closed.get_future().wait_for(5s) == std::future_status::ready);
    for (auto& r : results) {
      auto res = pool_fixture::get(std::move(r), 1s);
      CHECK(res.status == transport_status::shutdown);
    }
    CHECK_FALSE(events->on_loop_thread());
    events.reset();  // from this thread, while the loop runs
    uv_async_send(&keepalive);
  }
  runner.join();
  CHECK(uv_loop_close(&loop) == 0);
  server.resume();
}

TEST_CASE("an owned event loop runs posted work in order, never inline") {
  event_loop loop(nullptr);
  CHECK_FALSE(loop.on_loop_thread());
  std::vector<int> order;
  bool inline_run = false;
  bool posting = false;
  loop.run_sync([&] {
    CHECK(loop.on_loop_thread());
    posting = true;
    loop.post([&] {
      inline_run = posting;
      order.push_back(2);
    });
    posting = false;
    order.push_back(1);
  });
  loop.run_sync([&] { order.push_back(3); });
  CHECK_FALSE(inline_run);
  CHECK(order == std::vector<int>{1, 2, 3});
  CHECK_THROWS_AS(loop.run_sync([] { throw std::runtime_error("boom"); }), std::runtime_error);
}

TEST_CASE("posts racing the loop on its way to sleep all run: none waits for another wake-up") {
  // A post skips the wake-up signal while the loop works; the loop looks at
  // the queue once more right before it polls. Threads post while the loop
  // is busy (a task spins), idle, or between the two; a post whose task
  // waited for a later signal would leave its thread waiting alone at the
  // end, which the bound on every wait turns into a failure.
  event_loop loop(nullptr);
  constexpr int threads = 4;
  constexpr int posts_each = 2000;
  std::atomic<int> late{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < threads; ++t) {
    posters.emplace_back([&, t] {
      for (int i = 0; i < posts_each; ++i) {
        auto ran = std::make_shared<std::promise<void>>();
        auto f = ran->get_future();
        const bool busy = (i + t) % 3 == 0;
        loop.post([ran, busy] {
          if (busy) {
            const auto until = steady_clock::now() + 20us;
            while (steady_clock::now() < until) {
            }
          }
          ran->set_value();
        });
        if (f.wait_for(5s) != std::future_status::ready) {
          ++late;
          loop.post([] {});  // a nudge: the next wake-up runs the stranded task
          f.wait();
        }
      }
    });
  }
  for (auto& p : posters) p.join();
  CHECK(late.load() == 0);
}

TEST_CASE("an application loop polled on its backend fd and run with UV_RUN_NOWAIT wakes for every post") {
  // libuv's embedding pattern (uv_backend_fd): the application sleeps in its
  // own poll on the loop's fd and calls uv_run(UV_RUN_NOWAIT) when it is
  // readable. The loop passes no prepare callback between that run and the
  // application's sleep, so a post must make the fd readable whatever the
  // last run did: a task that waits for an unrelated event strands a
  // blocking caller.
  uv_loop_t uvl;
  REQUIRE(uv_loop_init(&uvl) == 0);
  int nudge[2];
  REQUIRE(::pipe(nudge) == 0);
  std::atomic<bool> stop{false};
  std::atomic<bool> finishing{false};
  std::thread app;
  int stranded = 0;
  {
    event_loop loop(&uvl);  // before the loop runs
    app = std::thread([&] {
      while (!stop.load()) {
        uv_run(&uvl, UV_RUN_NOWAIT);
        pollfd fds[2] = {{uv_backend_fd(&uvl), POLLIN, 0}, {nudge[0], POLLIN, 0}};
        const int timeout = finishing.load() ? 10 : uv_backend_timeout(&uvl);
        if (::poll(fds, 2, timeout) > 0 && (fds[1].revents & POLLIN) != 0) {
          char c;
          (void)::read(nudge[0], &c, 1);
        }
      }
    });
    for (int i = 0; i < 5; ++i) {
      auto ran = std::make_shared<std::promise<void>>();
      auto f = ran->get_future();
      loop.post([ran] { ran->set_value(); });
      if (f.wait_for(2s) != std::future_status::ready) {
        ++stranded;
        (void)::write(nudge[1], "x", 1);  // an unrelated event: the next run finds the task
        f.wait();
      }
    }
    finishing.store(true);  // the destructor's own post must not be stranded
    (void)::write(nudge[1], "x", 1);
  }
  stop.store(true);
  (void)::write(nudge[1], "x", 1);
  app.join();
  CHECK(stranded == 0);
  uv_run(&uvl, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&uvl) == 0);
  ::close(nudge[0]);
  ::close(nudge[1]);
}

TEST_CASE("tasks that keep posting from the loop thread let the loop turn: timers and I/O are not starved") {
  // A callback that retries at once (an operation answered without I/O, a
  // report "on the next loop turn") posts from the loop thread. The loop must
  // still reach its timers and sockets between such tasks, as it does
  // between wake-ups: a lock's extension timer or a reply must not wait for
  // the application to stop posting.
  event_loop loop(nullptr);
  struct chain {
    event_loop* loop;
    std::atomic<bool> timer_fired{false};
    steady_clock::time_point give_up;
    std::promise<void> stopped;
    int tasks = 0;
    void step() {
      ++tasks;
      if (timer_fired.load() || steady_clock::now() >= give_up) {
        stopped.set_value();
        return;
      }
      loop->post([this] { step(); });
    }
  } c;
  c.loop = &loop;
  uv_timer_t timer;
  const auto start = steady_clock::now();
  c.give_up = start + 3s;
  loop.run_sync([&] {
    uv_timer_init(loop.loop(), &timer);
    timer.data = &c;
    uv_timer_start(
        &timer, [](uv_timer_t* t) { static_cast<chain*>(t->data)->timer_fired.store(true); }, 1, 0);
    loop.post([&c] { c.step(); });
  });
  c.stopped.get_future().wait();
  const auto took = steady_clock::now() - start;
  CHECK(c.timer_fired.load());
  CHECK(took < 1s);
  loop.run_sync([&] { uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr); });
}

TEST_CASE("an external loop run by one thread, then by another, leaves no freed connection to the first") {
  // libuv lets an application run its loop from one thread, then (after
  // handing it over) from another. A command sent from a reply's callback is
  // listed to be written; had that list been the thread's (it once was),
  // another thread writing it (the idle handle) and then closing and freeing
  // the connection would leave the first thread's list naming it, and that
  // thread's next loop would read the freed connection (ASan:
  // heap-use-after-free). The list is the loop's (write_list.hpp).
  redis_server server;
  uv_loop_t first;
  REQUIRE(uv_loop_init(&first) == 0);
  auto events = std::make_unique<event_loop>(&first);
  auto pool = std::make_unique<node_pool>(&first, tcp_node(server), redsync_options{});
  bool followed = false;
  bool answered = false;
  events->post([&] {
    pool->send(0, encode_command({"PING"}), 2s, [&](command_result&&) {
      pool->send(0, encode_command({"PING"}), 2s, [&](command_result&&) { answered = true; });
      followed = true;  // the second PING is listed on this thread, not yet written
    });
  });
  const auto bound = steady_clock::now() + 5s;
  while (!followed && steady_clock::now() < bound) uv_run(&first, UV_RUN_ONCE);
  REQUIRE(followed);
  std::thread other([&] {
    while (!answered && steady_clock::now() < bound) uv_run(&first, UV_RUN_ONCE);
    bool closed = false;
    pool->close([&] { closed = true; });
    while (!closed) uv_run(&first, UV_RUN_ONCE);
    pool.reset();    // the connection is freed
    events.reset();  // on the loop's thread: closes its handles
    uv_run(&first, UV_RUN_DEFAULT);
  });
  other.join();
  CHECK(answered);
  CHECK(uv_loop_close(&first) == 0);
  // This thread runs a loop again: its prepare callback writes what this
  // thread's list names.
  uv_loop_t second;
  REQUIRE(uv_loop_init(&second) == 0);
  {
    event_loop again(&second);
    uv_run(&second, UV_RUN_NOWAIT);
  }
  uv_run(&second, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&second) == 0);
}

namespace {

// Sends once more on its pool from a thread_local destructor that runs after
// the library's own thread_locals of that thread were destroyed, then runs
// the loop until the reply and closes everything.
struct last_words {
  uv_loop_t* loop = nullptr;
  std::unique_ptr<event_loop> events;
  std::unique_ptr<node_pool> pool;
  bool* answered = nullptr;
  ~last_words() {
    if (!pool) return;
    bool* done = answered;
    pool->send(0, encode_command({"PING"}), 2s, [done](command_result&& r) { *done = is_ok(r); });
    const auto bound = steady_clock::now() + 5s;
    while (!*done && steady_clock::now() < bound) uv_run(loop, UV_RUN_ONCE);
    bool closed = false;
    pool->close([&] { closed = true; });
    while (!closed) uv_run(loop, UV_RUN_ONCE);
    pool.reset();
    events.reset();
    uv_run(loop, UV_RUN_DEFAULT);
  }
};

}  // namespace

TEST_CASE(
    "a command sent on the loop's thread while that thread exits is written, and nothing freed is touched") {
  // A Redsync destroyed on its loop thread sends the releases it owes. That
  // thread may be exiting: its thread_locals are destroyed in reverse order
  // of construction (and on the main thread, exit() destroys them before
  // static destructors and atexit handlers run). The write list, a
  // thread_local made when the first command was sent, is gone by then.
  redis_server server;
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  bool answered = false;
  std::thread t([&] {
    thread_local last_words words;  // made before the library's write list
    words.loop = &loop;
    words.answered = &answered;
    words.events = std::make_unique<event_loop>(&loop);
    words.pool = std::make_unique<node_pool>(&loop, tcp_node(server), redsync_options{});
    // Twice: the second, sent while connected, is listed for writing.
    for (int i = 0; i < 2; ++i) {
      bool warm = false;
      words.pool->send(0, encode_command({"PING"}), 2s, [&](command_result&&) { warm = true; });
      const auto bound = steady_clock::now() + 5s;
      while (!warm && steady_clock::now() < bound) uv_run(&loop, UV_RUN_ONCE);
    }
  });
  t.join();
  CHECK(answered);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_SUITE_END();
