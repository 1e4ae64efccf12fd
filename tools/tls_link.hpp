// A blocking TLS connection to one node for `status` and `ping`, which talk
// to the nodes outside the library (hiredis 0.14's blocking API has no TLS):
// TCP bounded by a timeout, then the library's own TLS setup and session
// (lib/transport/tls_session.hpp: the same trust store rules, --tls-ca-dir
// read whole, the same verification and the same words for its failures as
// `redsync lock`) over a blocking socket; commands encoded and replies parsed
// by hiredis.
#pragma once

#include <redsync/options.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

struct redisReply;
struct redisReader;

namespace redsync::detail {
class tls_context;
class tls_session;
}  // namespace redsync::detail

namespace redsync::cli {

class tls_link {
 public:
  /// Connects to `node` (node.tls.enabled) and runs the TLS handshake, each
  /// step and later each read or write bounded by `timeout`. On failure
  /// error() says why, in the library's words ("TLS handshake: certificate
  /// verify failed: ...").
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
  bool connect_tcp(const node_options& node, std::chrono::milliseconds timeout);
  bool send_output();
  bool receive(const char* during);

  int fd_ = -1;
  std::shared_ptr<const detail::tls_context> context_;
  std::unique_ptr<detail::tls_session> session_;
  redisReader* reader_ = nullptr;
  std::string plain_in_;  // decrypted, not yet given to the reader
  std::string error_;
};

/// Whether `node`'s port answers a TLS handshake (verification off): tells
/// a redis:// URI that reaches a TLS port ("connection reset by peer") from
/// other failures. Bounded by `timeout` per step.
bool speaks_tls(const node_options& node, std::chrono::milliseconds timeout);

}  // namespace redsync::cli
