// The fault-injection proxy (tests/support/tcp_proxy) in front of real
// redis-servers: bytes pass unchanged and in order, delay, stall, refuse,
// drop and retarget do what they say, closes pass through, and the library
// rides out a stalled or dropped node behind it.
#include "tcp_proxy.hpp"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <redsync/redsync.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

using namespace std::chrono_literals;
using namespace redsync::test;
using clock_type = std::chrono::steady_clock;

namespace {

// A blocking TCP connection to 127.0.0.1:port that sends and reads raw bytes,
// for what redis_client cannot do: pipeline, or write without waiting.
class raw_socket {
 public:
  explicit raw_socket(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("raw_socket: cannot connect to port " + std::to_string(port));
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~raw_socket() { ::close(fd_); }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("raw_socket: send failed");
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  /// Reads until `size` bytes arrived, the peer closed, or `bound` passed.
  std::string read(std::size_t size, std::chrono::milliseconds bound) {
    std::string out;
    const auto deadline = clock_type::now() + bound;
    while (out.size() < size && !closed_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      const auto n = ::recv(fd_, buf, std::min(sizeof buf, size - out.size()), 0);
      if (n <= 0) closed_ = true;  // EOF or reset
      if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

  /// True when the peer closed (EOF or reset) within `bound`; bytes before
  /// the close are discarded.
  bool closed_within(std::chrono::milliseconds bound) {
    const auto deadline = clock_type::now() + bound;
    while (!closed_ && clock_type::now() < deadline) read(1 << 16, 50ms);
    return closed_;
  }

 private:
  int fd_;
  bool closed_ = false;
};

std::string connected_clients(const redis_server& server) {
  // The asking connection counts itself.
  return redis_client(server).info_field("clients", "connected_clients");
}

// Proxies in front of every node of a cluster, and the URIs that reach the
// nodes through them.
struct proxied_cluster {
  explicit proxied_cluster(std::size_t n) : nodes(n) {
    for (std::size_t i = 0; i < n; ++i) {
      proxies.push_back(std::make_unique<tcp_proxy>(nodes[i].port()));
      uris.push_back("redis://127.0.0.1:" + std::to_string(proxies.back()->port()));
    }
  }
  cluster nodes;
  std::vector<std::unique_ptr<tcp_proxy>> proxies;
  std::vector<std::string> uris;
};

}  // namespace

TEST_SUITE("proxy") {
  TEST_CASE("a PING and a 1 MiB SET and GET pass through the proxy unchanged") {
    redis_server server;
    tcp_proxy proxy(server.port());
    redis_client client(server, {.port = proxy.port()});
    CHECK(client.command({"PING"}).str == "PONG");
    std::string value(1 << 20, '\0');
    for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>((i * 131) % 251);
    const auto key = unique_name("proxy-big");
    REQUIRE(client.command({"SET", key, value}).str == "OK");
    CHECK(client.get(key) == value);
    CHECK(redis_client(server).get(key) == value);
    const auto stats = proxy.stats();
    CHECK(stats.accepted == 1);
    CHECK(stats.open == 1);
    CHECK(stats.bytes_up > value.size());
    CHECK(stats.bytes_down > value.size());
  }

  TEST_CASE("delay holds each direction for at least the delay, and normal ends it") {
    redis_server server;
    tcp_proxy proxy(server.port());
    redis_client client(server, {.port = proxy.port()});
    REQUIRE(client.command({"PING"}).str == "PONG");
    proxy.delay(100ms, 20ms);
    auto t0 = clock_type::now();
    CHECK(client.command({"PING"}).str == "PONG");
    const auto delayed = clock_type::now() - t0;
    CHECK(delayed >= 190ms);  // 100 ms up, 100 ms down, less timer rounding
    CHECK(delayed < 2s);
    proxy.normal();
    t0 = clock_type::now();
    CHECK(client.command({"PING"}).str == "PONG");
    CHECK(clock_type::now() - t0 < 190ms);
  }

  TEST_CASE("with jitter, delayed chunks never overtake earlier ones") {
    redis_server server;
    tcp_proxy proxy(server.port());
    proxy.delay(5ms, 30ms);
    raw_socket socket(proxy.port());
    std::string expected;
    for (int i = 0; i < 40; ++i) {
      const auto word = "m" + std::to_string(i);
      socket.send("ECHO " + word + "\r\n");
      expected += "$" + std::to_string(word.size()) + "\r\n" + word + "\r\n";
      // Separate writes, so that the proxy reads separate chunks.
      std::this_thread::sleep_for(1ms);
    }
    CHECK(socket.read(expected.size(), 2s) == expected);
  }

  TEST_CASE("stall holds both directions and new connections; leaving it delivers everything in order") {
    redis_server server;
    tcp_proxy proxy(server.port());
    raw_socket early(proxy.port());
    early.send("PING\r\n");
    REQUIRE(early.read(7, 2s) == "+PONG\r\n");
    proxy.stall();
    early.send("ECHO a\r\nECHO b\r\n");
    CHECK(early.read(1, 200ms).empty());
    raw_socket late(proxy.port());
    late.send("PING\r\n");
    CHECK(wait_until([&] { return proxy.stats().accepted == 2; }, 2s));
    CHECK(late.read(1, 100ms).empty());
    // The held connection has not reached the server: early's and ours only.
    CHECK(connected_clients(server) == "2");
    proxy.normal();
    CHECK(early.read(14, 2s) == "$1\r\na\r\n$1\r\nb\r\n");
    CHECK(late.read(7, 2s) == "+PONG\r\n");
  }

  TEST_CASE("refuse closes new connections at once until it is turned off") {
    redis_server server;
    tcp_proxy proxy(server.port());
    proxy.refuse(true);
    raw_socket refused(proxy.port());
    CHECK(refused.closed_within(2s));
    proxy.refuse(false);
    redis_client client(server, {.port = proxy.port()});
    CHECK(client.command({"PING"}).str == "PONG");
    CHECK(proxy.stats().accepted == 2);
  }

  TEST_CASE("a client that leaves closes its upstream; an upstream that dies or refuses closes the client") {
    redis_server server;
    tcp_proxy proxy(server.port());
    {
      raw_socket leaving(proxy.port());
      leaving.send("PING\r\n");
      REQUIRE(leaving.read(7, 2s) == "+PONG\r\n");
    }
    CHECK(wait_until([&] { return proxy.stats().open == 0; }, 2s));
    CHECK(wait_until([&] { return connected_clients(server) == "1"; }, 2s));

    {
      raw_socket stranded(proxy.port());
      stranded.send("PING\r\n");
      REQUIRE(stranded.read(7, 2s) == "+PONG\r\n");
      server.kill();
      // The server's close reaches the client as a half-close, as it would
      // without the proxy; the pair is gone once the client closes too.
      CHECK(stranded.closed_within(2s));
    }
    raw_socket refused(proxy.port());  // nothing listens on the target now
    CHECK(refused.closed_within(2s));
    CHECK(wait_until([&] { return proxy.stats().open == 0; }, 2s));
  }

  TEST_CASE("retarget sends new connections to the other server and leaves current ones") {
    redis_server first;
    redis_server second;
    tcp_proxy proxy(first.port());
    const auto key = unique_name("proxy-retarget");
    redis_client before(first, {.port = proxy.port()});
    REQUIRE(before.command({"SET", key, "first"}).str == "OK");
    proxy.retarget(second.port());
    redis_client after(second, {.port = proxy.port()});
    CHECK_FALSE(after.get(key).has_value());
    REQUIRE(after.command({"SET", key, "second"}).str == "OK");
    CHECK(before.get(key) == std::string("first"));
    CHECK(redis_client(first).get(key) == std::string("first"));
    CHECK(redis_client(second).get(key) == std::string("second"));
  }

  TEST_CASE("a lock succeeds with 1 of 3 nodes stalled behind its proxy and reports that node timed out") {
    proxied_cluster c(3);
    redsync::Redsync rs(c.uris, fresh_nodes());
    // Connect first, so the measurement is about the stall, not connecting.
    auto warm = rs.new_mutex(unique_name("proxy-warm"));
    REQUIRE(warm.lock(redsync::context{}).ok());
    REQUIRE(warm.unlock(redsync::context{}).ok());
    c.proxies[2]->stall();
    // Per-node timeout: 2 s * 0.1 = 200 ms.
    auto m = rs.new_mutex(unique_name("proxy-stalled"), {.expiry = 2s, .timeout_factor = 0.1});
    const auto t0 = clock_type::now();
    auto r = m.lock(redsync::context{});
    const auto took = clock_type::now() - t0;
    REQUIRE_MESSAGE(r.ok(), r.describe());
    CHECK(took < 2 * 200ms + 600ms);
    CHECK(r.nodes[0].status == redsync::node_status::ok);
    CHECK(r.nodes[1].status == redsync::node_status::ok);
    CHECK(r.nodes[2].status == redsync::node_status::timeout);
    c.proxies[2]->normal();
    CHECK(m.unlock(redsync::context{}).ok());
  }

  TEST_CASE("after the proxies drop every connection the library reconnects and locks on all nodes") {
    proxied_cluster c(3);
    redsync::Redsync rs(c.uris, fresh_nodes());
    auto warm = rs.new_mutex(unique_name("proxy-warm"));
    REQUIRE(warm.lock(redsync::context{}).ok());
    REQUIRE(warm.unlock(redsync::context{}).ok());
    for (auto& p : c.proxies) p->drop_connections();
    for (auto& p : c.proxies) CHECK(wait_until([&] { return p->stats().open == 0; }, 2s));
    // The first calls may find a connection reset or in its reconnect backoff.
    redsync::result last;
    const bool all_nodes = wait_until(
        [&] {
          auto m = rs.new_mutex(unique_name("proxy-after-drop"), {.tries = 1});
          last = m.lock(redsync::context::timeout(1s));
          if (last.ok()) (void)m.unlock(redsync::context{});
          return last.ok() && last.nodes_with(redsync::node_status::ok).size() == 3;
        },
        2500ms);
    CHECK_MESSAGE(all_nodes, last.describe());
    for (auto& p : c.proxies) CHECK(p->stats().accepted >= 2);
  }
}
