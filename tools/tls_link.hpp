// A blocking TLS connection to one node for `status` and `ping`, which talk
// to the nodes outside the library (hiredis 0.14's blocking API has no TLS):
// TCP and the TLS handshake bounded by a timeout, commands encoded and
// replies parsed by hiredis, bytes moved by OpenSSL.
#pragma once

#include <redsync/options.hpp>

#include <chrono>
#include <string>
#include <vector>

struct redisReply;
struct redisReader;
struct ssl_st;
struct ssl_ctx_st;

namespace redsync::cli {

class tls_link {
 public:
  /// Connects to `node` (node.tls.enabled) and runs the TLS handshake, each
  /// step and later each read or write bounded by `timeout`. On failure
  /// error() says why (OpenSSL's reason for a failed verification).
  tls_link(const node_options& node, std::chrono::milliseconds timeout);
  ~tls_link();
  tls_link(const tls_link&) = delete;
  tls_link& operator=(const tls_link&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  /// Queues a command; sent by the next read_reply().
  void append(const std::vector<std::string>& argv);
  /// Sends what is queued, then reads one reply; nullptr on failure (error()
  /// says why). The caller frees the reply with freeReplyObject.
  redisReply* read_reply();

 private:
  bool flush();
  bool connect_tcp(const node_options& node, std::chrono::milliseconds timeout);
  bool setup_tls(const node_options& node);
  void fail_tls(const char* during);

  int fd_ = -1;
  ssl_ctx_st* ssl_ctx_ = nullptr;
  ssl_st* ssl_ = nullptr;
  redisReader* reader_ = nullptr;
  std::string out_;
  std::string error_;
  bool verifies_ = true;  // false with tls.insecure_skip_verify
};

}  // namespace redsync::cli
