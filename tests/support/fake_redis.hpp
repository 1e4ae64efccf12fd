// Test harness: a tiny fake Redis peer, for what a real redis-server cannot
// be made to do on demand (answer INFO like Valkey or Dragonfly does, or
// refuse it). It speaks just enough RESP2 for redsync's flows on one node.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace redsync::test {

/// What a fake_redis answers. All fields are optional.
struct fake_config {
  /// The whole RESP reply to `INFO` (any section), e.g. `fake_redis::bulk(text)`
  /// or `"-NOPERM ...\r\n"`. Default: a Redis-like `# Server` section with
  /// `run_id`.
  std::string info_reply{};
  /// The run_id its redsync record names, in the replies to the acquisition
  /// and record scripts. Default: 40 'a's.
  std::string record_run = std::string(40, 'a');
};

/// A fake Redis server on 127.0.0.1 (a free port), served by its own thread.
///
/// It parses RESP arrays of bulk strings (partial reads and pipelined
/// commands included) and answers, modelling a healthy node whose redsync
/// record was verified for `record_run` 10 minutes ago:
/// - `INFO ...`: `info_reply`;
/// - `EVALSHA`/`EVAL` of the acquisition script: `{1, record_run, 600000}`;
///   of the record read: `{"5", record_run, "0", "600000"}`; of the stamp,
///   release, extend, check, fence and leave scripts: `:1`;
/// - `PING`: `+PONG`; anything else: `-ERR unknown`.
///
/// The destructor stops the thread and closes every socket. The constructor
/// throws std::runtime_error when it cannot listen. Thread-safe accessors.
class fake_redis {
 public:
  explicit fake_redis(fake_config cfg = {});
  ~fake_redis();
  fake_redis(const fake_redis&) = delete;
  fake_redis& operator=(const fake_redis&) = delete;

  int port() const { return port_; }
  /// "127.0.0.1:PORT".
  std::string address() const;
  /// "redis://127.0.0.1:PORT".
  std::string uri() const;

  /// How many commands named `verb` (upper case, e.g. "INFO", "EVALSHA") it
  /// has answered.
  std::size_t calls(std::string_view verb) const;
  /// How many script calls (EVALSHA or EVAL) of the acquisition script it
  /// has answered.
  std::size_t acquisitions() const;

  /// `s` as a RESP bulk string reply.
  static std::string bulk(std::string_view s);
  /// A Redis-like `INFO server` text (with `run_id`), as a bulk reply.
  static std::string redis_info(std::string_view run_id);

 private:
  struct client;
  void serve();
  // The reply to one command, counted.
  std::string answer(const std::vector<std::string>& argv);

  fake_config cfg_;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};  // a pipe: writing to [1] ends serve()
  int port_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, std::size_t, std::less<>> calls_;
  std::size_t acquisitions_ = 0;
  std::thread thread_;
};

}  // namespace redsync::test
