// Test harness: real redis-server processes owned by RAII objects.
//
// Every server runs on 127.0.0.1 with a free port, no persistence (unless
// extra_args ask for it), a private temporary directory and its own log.
// A process never outlives its owner: the destructor kills and reaps it, a
// process-wide registry kills whatever is left at exit or std::terminate, and
// each child gets PR_SET_PDEATHSIG=SIGKILL so it dies with the test process
// even on a crash. (PDEATHSIG fires when the *thread* that started the server
// exits, so start servers from the test's main thread, as doctest does.)
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redsync::test {

/// TLS for a redis_server: the PEM files it serves with.
struct tls_server_config {
  /// The server's certificate and key (e.g. from test_ca::issue()).
  std::string cert_file;
  std::string key_file;
  /// The CA that client certificates must come from.
  std::string ca_file;
  /// Require a client certificate (`--tls-auth-clients yes`). Default false.
  bool require_client_cert = false;
};

/// How to start a redis_server. All fields are optional.
struct config {
  /// Extra command-line arguments appended after ours, e.g. {"--appendonly", "yes"}.
  std::vector<std::string> extra_args{};
  /// When non-empty, the server gets `--requirepass password`; redis_client AUTHs with it.
  std::string password{};
  /// Also listen on `<temp dir>/redis.sock` (permissions 700).
  bool unix_socket = false;
  /// Extra environment entries ("NAME=value") for the server process, on top
  /// of the test's own environment, e.g. the clock shim (clock_offset.hpp).
  std::vector<std::string> env{};
  /// Also listen with TLS on tls_port() (the plain port stays, for the
  /// harness's own checks and redis_client).
  std::optional<tls_server_config> tls{};
};

/// One redis-server child process. Non-copyable, non-movable.
///
/// The binary is `$REDSYNC_REDIS_SERVER`, or `redis-server` on PATH. The
/// constructor returns once the server answers PING (NOAUTH counts when a
/// password is set), within 10 s, or throws std::runtime_error with the tail
/// of the server log. Not thread-safe: use one object from one thread.
class redis_server {
 public:
  explicit redis_server(config cfg = {});
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  /// TCP port; stays the same across kill()/restart().
  int port() const { return port_; }
  /// TLS port (config::tls); 0 without TLS. Stays the same across restart().
  int tls_port() const { return tls_port_; }
  /// "rediss://127.0.0.1:TLS_PORT" (with the password, if any) followed by
  /// `query` (e.g. "?ca=/path/ca.pem"); empty without config::tls.
  std::string tls_uri(const std::string& query = "") const;
  /// "127.0.0.1:PORT".
  std::string address() const;
  /// "redis://127.0.0.1:PORT", or "redis://:PASSWORD@127.0.0.1:PORT".
  std::string uri() const;
  /// Path of the unix socket; empty unless config::unix_socket.
  std::string unix_path() const;
  /// "unix://PATH" ("unix://:PASSWORD@PATH" with a password); empty unless config::unix_socket.
  std::string unix_uri() const;
  /// The server's password (empty when none).
  const std::string& password() const { return cfg_.password; }
  /// The private temporary directory (log, socket, any persistence files).
  std::string dir() const { return dir_; }
  /// Last lines of the server log (and of its captured stdout/stderr).
  std::string log_tail(std::size_t lines = 20) const;

  /// PID of the running process, or -1 when it is not running.
  pid_t pid() const;
  /// True while the process exists (a paused process is running). Reaps a
  /// process that died on its own.
  bool running() const;
  /// True while the process is stopped by SIGSTOP (state T in /proc/PID/stat).
  bool paused() const;

  /// SIGKILL and reap. No-op when not running.
  void kill();
  /// SIGSTOP, then wait (bounded, 5 s) until /proc/PID/stat shows state T.
  /// Throws std::runtime_error when not running or the state never shows.
  void pause();
  /// SIGCONT, then wait (bounded, 5 s) until the process is no longer in state T.
  void resume();
  /// Kill if running, then start again on the same port and directory and wait
  /// for PING. The dataset is empty unless persistence was enabled via extra_args.
  /// Throws std::runtime_error if the server does not come back (e.g. port taken).
  void restart();
  /// Graceful stop: SIGCONT if paused, SIGTERM, wait up to 5 s, then SIGKILL.
  void stop();

 private:
  friend class cluster;
  struct deferred_tag {};
  // Launches the process without waiting; cluster then calls await_ready().
  redis_server(config cfg, deferred_tag);
  void launch();
  // Waits for PING; with retry_port, relaunches on a fresh port when the
  // process died because its port was taken meanwhile.
  void await_ready(bool retry_port);
  bool reap(bool block) const;
  void cleanup() noexcept;

  config cfg_;
  std::string binary_;
  std::string dir_;
  int port_ = 0;
  int tls_port_ = 0;
  mutable pid_t pid_ = -1;
  std::chrono::steady_clock::time_point launched_at_{};
};

/// n redis_servers with the same config, started concurrently.
/// Throws std::runtime_error if any fails to start (the others are stopped).
class cluster {
 public:
  explicit cluster(std::size_t n, config cfg = {});
  redis_server& operator[](std::size_t i) { return *servers_.at(i); }
  const redis_server& operator[](std::size_t i) const { return *servers_.at(i); }
  std::size_t size() const { return servers_.size(); }
  /// uri() of each server, in order.
  std::vector<std::string> uris() const;
  /// address() ("127.0.0.1:PORT") of each server, in order.
  std::vector<std::string> addresses() const;

 private:
  std::vector<std::unique_ptr<redis_server>> servers_;
};

/// A free TCP port on 127.0.0.1, as the kernel hands them out (racy by
/// nature: someone may take it before it is bound).
int free_port();

/// SIGKILLs and reaps every server process still alive. Called automatically
/// at exit and from std::terminate; safe to call at any time.
void kill_all_servers() noexcept;

}  // namespace redsync::test
