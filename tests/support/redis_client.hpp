// Test harness: a tiny blocking Redis client for assertions in tests.
// Built on the hiredis sync API only (the subset shared by hiredis 0.14 and 1.x).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct redisContext;

namespace redsync::test {

class redis_server;

/// How redis_client talks to its server. All fields are optional.
struct client_options {
  /// Connect timeout and per-command read/write timeout. Default 2 s.
  std::chrono::milliseconds timeout{2000};
  /// Connect through the server's unix socket (the server needs config::unix_socket).
  bool unix_socket = false;
  /// Connect to this TCP port on 127.0.0.1 instead of the server's own, e.g.
  /// a tcp_proxy in front of it. 0 (default) = the server's port.
  int port = 0;
};

/// A blocking connection to one redis_server, for checking what a test did.
///
/// The constructor connects (and AUTHs with the server's password, if any) or
/// throws std::runtime_error. After an I/O error or timeout the connection is
/// dropped and the next command reconnects. Not thread-safe.
class redis_client {
 public:
  explicit redis_client(const redis_server& server, client_options opts = {});
  ~redis_client();
  redis_client(const redis_client&) = delete;
  redis_client& operator=(const redis_client&) = delete;

  /// One RESP2 reply, owned.
  struct reply {
    enum class kind { status, error, string, integer, nil, array } type = kind::nil;
    std::string str;  ///< status, error and string replies
    long long integer = 0;
    std::vector<reply> elements;  ///< array replies
  };

  /// Sends argv, returns the reply (an error reply is a value, not an
  /// exception). Throws std::runtime_error on connection failure or timeout.
  reply command(const std::vector<std::string>& argv);

  /// GET key; nullopt when the key does not exist.
  std::optional<std::string> get(const std::string& key);
  /// PTTL key in milliseconds: -2 when the key does not exist, -1 without expiry.
  long long pttl(const std::string& key);
  bool exists(const std::string& key);
  long long dbsize();
  /// Calls of a command from INFO commandstats, e.g. calls("set"),
  /// calls("evalsha"), calls("eval"); 0 if the command was never called.
  long long calls(const std::string& cmd);
  /// CONFIG RESETSTAT (zeroes calls()).
  void reset_stats();
  void flushall();
  /// A field of INFO <section>, e.g. info_field("clients", "connected_clients");
  /// empty when absent.
  std::string info_field(const std::string& section, const std::string& field);

 private:
  void connect();

  struct context_deleter {
    void operator()(redisContext* c) const;
  };
  std::string host_;
  int port_ = 0;
  std::string unix_path_;
  std::string password_;
  client_options opts_;
  std::unique_ptr<redisContext, context_deleter> ctx_;
};

}  // namespace redsync::test
