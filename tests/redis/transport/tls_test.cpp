// TLS to real redis-servers (`--tls-port`) with a throw-away CA made by the
// test: verified connections, every way verification fails (with OpenSSL's
// reason as the node's error), mutual TLS, a server frozen mid-handshake,
// and the files read at construction.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "transport/event_loop.hpp"
#include "transport/node_pool.hpp"

#include <redsync/error.hpp>
#include <redsync/redsync.hpp>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redis_client.hpp"
#include "redis_server.hpp"
#include "test_ca.hpp"

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

// A TLS redis_server with a certificate from `ca` for localhost and
// 127.0.0.1 (unless `request` says otherwise).
std::unique_ptr<redis_server> tls_server(test_ca& ca, const cert_request& request = {},
                                         bool require_client_cert = false) {
  const issued_cert cert = ca.issue(request);
  return std::make_unique<redis_server>(
      config{.tls = tls_server_config{cert.cert_file, cert.key_file, ca.ca_file(), require_client_cert}});
}

node_options tls_node(const redis_server& s, const std::string& ca_file) {
  node_options n;
  n.host = "127.0.0.1";
  n.port = s.tls_port();
  n.tls.enabled = true;
  n.tls.ca_file = ca_file;
  return n;
}

// A node_pool on an owned event loop; each call waits for its outcome with a
// bound.
class tls_pool {
 public:
  explicit tls_pool(node_options node, redsync_options options = {})
      : pool_(std::make_unique<node_pool>(loop_.loop(), std::move(node), options)) {}
  ~tls_pool() {
    std::promise<void> done;
    loop_.run_sync([&] { pool_->close([&] { done.set_value(); }); });
    REQUIRE(done.get_future().wait_for(10s) == std::future_status::ready);
  }

  command_result call(std::vector<std::string> argv, std::chrono::milliseconds timeout = 3000ms) {
    auto promise = std::make_shared<std::promise<command_result>>();
    auto future = promise->get_future();
    std::vector<std::string_view> views(argv.begin(), argv.end());
    auto wire = encode_command(views);
    loop_.post([this, wire, timeout, promise] {
      pool_->send(0, wire, timeout, [promise](command_result&& r) { promise->set_value(std::move(r)); });
    });
    REQUIRE(future.wait_for(timeout + 10s) == std::future_status::ready);
    return future.get();
  }

 private:
  event_loop loop_{nullptr};
  std::unique_ptr<node_pool> pool_;
};

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The config_error that constructing a Redsync on `node` throws.
std::string construction_error(const node_options& node) {
  try {
    redsync::Redsync rs(std::vector<node_options>{node});
  } catch (const redsync::config_error& e) {
    return e.what();
  }
  FAIL_CHECK("no config_error");
  return {};
}

// A TCP peer that is no TLS server, for what a real one cannot be made to
// do on demand: it accepts one connection, reads the ClientHello, then
// either closes at once or sends the first bytes of a record and nothing
// more (a server stuck mid-handshake after its first flight began).
class raw_peer {
 public:
  enum class action { close_after_hello, partial_record };

  explicit raw_peer(action what) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listen_fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listen_fd_, 4) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, what] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      char buf[4096];
      (void)::read(fd, buf, sizeof buf);  // the ClientHello
      if (what == action::partial_record) {
        // A handshake record header announcing 16 KB, then silence.
        const unsigned char header[] = {0x16, 0x03, 0x03, 0x40, 0x00, 0x02};
        (void)::write(fd, header, sizeof header);
        std::unique_lock lk(mu_);
        cv_.wait(lk, [this] { return done_; });
      }
      ::close(fd);
    });
  }
  ~raw_peer() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

node_options tls_node_at(int port, const std::string& ca_file) {
  node_options n;
  n.host = "127.0.0.1";
  n.port = port;
  n.tls.enabled = true;
  n.tls.ca_file = ca_file;
  return n;
}

}  // namespace

TEST_SUITE_BEGIN("tls");

TEST_CASE("a TLS node verified against the test CA round-trips commands") {
  test_ca ca;
  auto server = tls_server(ca);
  tls_pool pool(tls_node(*server, ca.ca_file()));
  const command_result ping = pool.call({"PING"});
  REQUIRE_MESSAGE(ping.status == transport_status::ok, ping.error);
  CHECK(ping.value.str == "PONG");
  CHECK(pool.call({"SET", "tls:roundtrip", "v1"}).value.str == "OK");
  CHECK(pool.call({"GET", "tls:roundtrip"}).value.str == "v1");
  CHECK(redis_client(*server).get("tls:roundtrip") == "v1");
}

TEST_CASE("a value larger than the socket buffers crosses TLS whole, and pipelined replies stay in order") {
  test_ca ca;
  auto server = tls_server(ca);
  tls_pool pool(tls_node(*server, ca.ca_file()));
  const std::string big(3 * 1024 * 1024, 'x');
  const command_result set = pool.call({"SET", "tls:big", big}, 10000ms);
  REQUIRE_MESSAGE(set.status == transport_status::ok, set.error);
  const command_result get = pool.call({"GET", "tls:big"}, 10000ms);
  REQUIRE(get.status == transport_status::ok);
  CHECK(get.value.str.size() == big.size());
  CHECK(get.value.str == big);
  for (int i = 0; i < 50; ++i) {
    CHECK(pool.call({"INCR", "tls:counter"}).value.integer == i + 1);
  }
}

TEST_CASE("a CA directory in OpenSSL's hashed layout verifies the server") {
  test_ca ca;
  auto server = tls_server(ca);
  node_options n = tls_node(*server, "");
  n.tls.ca_dir = ca.ca_dir();
  tls_pool pool(n);
  const command_result r = pool.call({"PING"});
  CHECK_MESSAGE(r.status == transport_status::ok, r.error);
}

TEST_CASE("a peer that stops after the first bytes of its handshake fails within the connect timeout") {
  test_ca ca;
  raw_peer peer(raw_peer::action::partial_record);
  redsync_options o;
  o.connect_timeout = 300ms;
  tls_pool pool(tls_node_at(peer.port(), ca.ca_file()), o);
  const auto start = steady_clock::now();
  const command_result r = pool.call({"PING"}, 5000ms);
  const auto took = steady_clock::now() - start;
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(mentions(r.error, "within the connect timeout (300 ms)"), r.error);
  CHECK(took < 3s);
}

TEST_CASE("a peer that closes during the handshake fails the connect at once, saying so") {
  test_ca ca;
  raw_peer peer(raw_peer::action::close_after_hello);
  redsync_options o;
  o.connect_timeout = 5000ms;
  tls_pool pool(tls_node_at(peer.port(), ca.ca_file()), o);
  const auto start = steady_clock::now();
  const command_result r = pool.call({"PING"}, 8000ms);
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(mentions(r.error, "TLS"), r.error);
  CHECK(steady_clock::now() - start < 3s);  // not the 5 s connect timeout
}

TEST_CASE("a plaintext redis-server behind a TLS node fails the connect with an error, not a hang") {
  test_ca ca;
  redis_server plain;
  redsync_options o;
  o.connect_timeout = 2000ms;
  tls_pool pool(tls_node_at(plain.port(), ca.ca_file()), o);
  const auto start = steady_clock::now();
  const command_result r = pool.call({"PING"}, 5000ms);
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(mentions(r.error, "TLS"), r.error);
  CHECK(steady_clock::now() - start < 4s);
}

TEST_CASE("a CA directory is read whole at construction: no certificate file is read while connecting") {
  // OpenSSL reads a hashed directory lazily, during verification, which
  // would be file I/O on the loop thread. Emptying the directory after
  // construction proves nothing is read from it later.
  test_ca ca;
  auto server = tls_server(ca);
  const std::string copy = ca.dir() + "/ca-copy";
  std::filesystem::copy(ca.ca_dir(), copy);
  node_options n = tls_node(*server, "");
  n.tls.ca_dir = copy;
  tls_pool pool(n);
  std::filesystem::remove_all(copy);
  const command_result r = pool.call({"PING"});
  CHECK_MESSAGE(r.status == transport_status::ok, r.error);
}

TEST_CASE("an encrypted private key is a config error naming the file, not a pass-phrase prompt") {
  test_ca ca;
  const issued_cert a = ca.issue(cert_request{.name = "enc"});
  const std::string encrypted = ca.dir() + "/enc-encrypted.key";
  REQUIRE(std::system(("openssl pkey -in '" + a.key_file + "' -aes256 -passout pass:secret -out '" +
                       encrypted + "' </dev/null 2>/dev/null")
                          .c_str()) == 0);
  node_options n;
  n.port = 6380;
  n.tls.enabled = true;
  n.tls.ca_file = ca.ca_file();
  n.tls.cert_file = a.cert_file;
  n.tls.key_file = encrypted;
  // OpenSSL's default would ask for the pass phrase on the terminal, and
  // write its prompt to stderr where there is none: watch stderr.
  const std::string captured = ca.dir() + "/stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  const int file = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(saved >= 0);
  REQUIRE(file >= 0);
  ::dup2(file, STDERR_FILENO);
  const std::string m = construction_error(n);
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(file);
  std::ifstream in(captured);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_MESSAGE(written.find("pass phrase") == std::string::npos, written);
  CHECK_MESSAGE(mentions(m, "node_options.tls.key_file = \"" + encrypted + "\""), m);
  CHECK_MESSAGE(mentions(m, "encrypted"), m);
}

TEST_CASE("the name checked can differ from the host: server_name, or a DNS host name") {
  test_ca ca;
  auto server = tls_server(ca, cert_request{.dns = {"redis.internal"}, .ips = {}});
  node_options n = tls_node(*server, ca.ca_file());
  n.tls.server_name = "redis.internal";
  tls_pool pool(n);
  const command_result r = pool.call({"PING"});
  CHECK_MESSAGE(r.status == transport_status::ok, r.error);

  auto local = tls_server(ca, cert_request{.name = "local", .dns = {"localhost"}, .ips = {}});
  node_options by_name = tls_node(*local, ca.ca_file());
  by_name.host = "localhost";
  tls_pool pool2(by_name);
  const command_result r2 = pool2.call({"PING"});
  CHECK_MESSAGE(r2.status == transport_status::ok, r2.error);
}

TEST_CASE("a server certificate from another CA fails the connect with the verification error") {
  test_ca ca;
  test_ca other("another test CA");
  auto server = tls_server(ca);
  tls_pool pool(tls_node(*server, other.ca_file()));
  const auto start = steady_clock::now();
  const command_result r = pool.call({"PING"});
  CHECK(steady_clock::now() - start < 2s);
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(mentions(r.error, "TLS handshake: certificate verify failed"), r.error);
  // Which of the two depends on whether the server sends its CA along.
  CHECK_MESSAGE((mentions(r.error, "unable to get local issuer certificate") ||
                 mentions(r.error, "self-signed certificate in certificate chain")),
                r.error);
}

TEST_CASE("a server name the certificate does not hold fails with hostname mismatch, naming it") {
  test_ca ca;
  auto server = tls_server(ca);
  node_options n = tls_node(*server, ca.ca_file());
  n.tls.server_name = "wrong.example";
  tls_pool pool(n);
  const command_result r = pool.call({"PING"});
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(mentions(r.error, "hostname mismatch"), r.error);
  CHECK_MESSAGE(mentions(r.error, "\"wrong.example\""), r.error);
}

TEST_CASE("an IP address the certificate does not hold fails with IP address mismatch") {
  test_ca ca;
  auto server = tls_server(ca, cert_request{.dns = {"localhost"}, .ips = {"10.9.8.7"}});
  tls_pool pool(tls_node(*server, ca.ca_file()));
  const command_result r = pool.call({"PING"});
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(mentions(r.error, "IP address mismatch"), r.error);
}

TEST_CASE("an expired server certificate fails with certificate has expired") {
  test_ca ca;
  auto server = tls_server(ca, cert_request{.not_before = -48h, .not_after = -24h});
  tls_pool pool(tls_node(*server, ca.ca_file()));
  const command_result r = pool.call({"PING"});
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(mentions(r.error, "certificate has expired"), r.error);
}

TEST_CASE("insecure_skip_verify connects despite an unknown CA and a wrong name") {
  test_ca ca;
  test_ca other("another test CA");
  auto server = tls_server(ca);
  node_options n = tls_node(*server, other.ca_file());
  n.tls.server_name = "wrong.example";
  n.tls.insecure_skip_verify = true;
  tls_pool pool(n);
  const command_result r = pool.call({"PING"});
  CHECK_MESSAGE(r.status == transport_status::ok, r.error);
}

TEST_CASE("a server that requires a client certificate refuses a client without one, and says so") {
  test_ca ca;
  auto server = tls_server(ca, {}, true);
  tls_pool pool(tls_node(*server, ca.ca_file()));
  const command_result r = pool.call({"PING"});
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(mentions(r.error, "the server requires a client certificate"), r.error);
  CHECK_MESSAGE(mentions(r.error, "alert certificate required"), r.error);
}

TEST_CASE("a client certificate from the server's CA passes mutual TLS") {
  test_ca ca;
  auto server = tls_server(ca, {}, true);
  const issued_cert client = ca.issue(cert_request{.name = "client", .dns = {"client"}, .ips = {}});
  node_options n = tls_node(*server, ca.ca_file());
  n.tls.cert_file = client.cert_file;
  n.tls.key_file = client.key_file;
  tls_pool pool(n);
  const command_result r = pool.call({"PING"});
  CHECK_MESSAGE(r.status == transport_status::ok, r.error);
  CHECK(r.value.str == "PONG");
}

TEST_CASE("a TLS node frozen mid-handshake fails within the connect timeout, not later") {
  test_ca ca;
  auto server = tls_server(ca);
  server->pause();  // the kernel still accepts; nobody answers the ClientHello
  redsync_options o;
  o.connect_timeout = 300ms;
  tls_pool pool(tls_node(*server, ca.ca_file()), o);
  const auto start = steady_clock::now();
  const command_result r = pool.call({"PING"}, 5000ms);
  const auto took = steady_clock::now() - start;
  CHECK(r.status == transport_status::unreachable);
  CHECK_MESSAGE(
      mentions(r.error, "TLS handshake: no answer from the server within the connect timeout (300 ms)"),
      r.error);
  CHECK(took >= 250ms);
  CHECK(took < 3s);
  server->resume();
}

TEST_CASE("unreadable TLS files and a key that does not match are config errors from the constructor") {
  test_ca ca;
  const issued_cert a = ca.issue(cert_request{.name = "a"});
  const issued_cert b = ca.issue(cert_request{.name = "b"});
  node_options n;
  n.port = 6380;
  n.tls.enabled = true;

  n.tls.ca_file = ca.dir() + "/missing.pem";
  std::string m = construction_error(n);
  CHECK_MESSAGE(mentions(m, "node_options.tls.ca_file = \"" + ca.dir() + "/missing.pem\""), m);
  CHECK_MESSAGE(mentions(m, "No such file"), m);

  n.tls.ca_file = a.key_file;  // a key, not a certificate
  m = construction_error(n);
  CHECK_MESSAGE(mentions(m, "node_options.tls.ca_file"), m);
  CHECK_MESSAGE(mentions(m, "no PEM CA certificate"), m);

  n.tls.ca_file = ca.ca_file();
  n.tls.ca_dir = ca.dir() + "/nowhere";
  m = construction_error(n);
  CHECK_MESSAGE(mentions(m, "node_options.tls.ca_dir"), m);
  CHECK_MESSAGE(mentions(m, "is not a directory"), m);

  n.tls.ca_dir.clear();
  n.tls.cert_file = a.cert_file;
  n.tls.key_file = b.key_file;
  m = construction_error(n);
  CHECK_MESSAGE(mentions(m, "node_options.tls.key_file = \"" + b.key_file + "\""), m);
  CHECK_MESSAGE(mentions(m, "does not match the certificate"), m);

  n.tls.key_file.clear();
  m = construction_error(n);
  CHECK_MESSAGE(mentions(m, "needs both cert_file and key_file"), m);

  node_options plain;
  plain.tls.ca_file = ca.ca_file();
  m = construction_error(plain);
  CHECK_MESSAGE(mentions(m, "tls.enabled is false"), m);
}

TEST_SUITE_END();
