#pragma once

// TLS for a connection, over memory BIOs: the connection moves bytes with
// libuv, OpenSSL only transforms them. Ciphertext read from the socket goes
// in with feed(), plaintext comes out of read(); plaintext goes in with
// write(), ciphertext to send comes out of take_output(). Nothing here
// touches a socket or blocks.
//
// tls_context (one SSL_CTX per node) is built on the thread that constructs
// the Redsync, where reading the CA, certificate and key files may block;
// tls_session (one SSL per connection) lives on the loop thread.

#include <redsync/options.hpp>

#include <cstddef>
#include <memory>
#include <string>

// OpenSSL's types, forward-declared so that this header does not pull in
// OpenSSL's (ssl_st, ssl_ctx_st and bio_st are the names <openssl/types.h> gives).
struct ssl_st;
struct ssl_ctx_st;
struct bio_st;

namespace redsync::detail {

class tls_context {
 public:
  // Builds the SSL_CTX for `node` (node.tls.enabled): trust store, client
  // certificate and key, verification mode. Throws config_error naming the
  // field and the path when a file cannot be used.
  explicit tls_context(const node_options& node);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  ssl_ctx_st* get() const noexcept { return ctx_; }
  // The name checked against the server's certificate (server_name, else the
  // host), and whether it is an IP address (checked as such, no SNI).
  const std::string& verify_name() const noexcept { return name_; }
  bool name_is_ip() const noexcept { return name_is_ip_; }
  bool verifies() const noexcept { return verify_; }

 private:
  ssl_ctx_st* ctx_ = nullptr;
  std::string name_;
  bool name_is_ip_ = false;
  bool verify_ = true;
};

// The context for `node`, or null when node.tls.enabled is false.
std::shared_ptr<const tls_context> make_tls_context(const node_options& node);

class tls_session {
 public:
  enum class progress { pending, done, failed };

  explicit tls_session(const tls_context& context);
  ~tls_session();
  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  // Runs the client handshake as far as the bytes fed so far allow. After
  // `failed`, error() says why (OpenSSL's reason, the certificate check's
  // verdict). Call take_output() after each step: the handshake's messages
  // (and, on failure, the alert) are there.
  progress handshake();
  // Ciphertext from the socket.
  void feed(const char* data, std::size_t size);
  // Appends the plaintext decrypted so far to `out`. False when the session
  // ended: an alert from the server (e.g. it wants a client certificate), a
  // close_notify, or a malformed record; error() says which. Plaintext read
  // before the end is in `out` all the same.
  bool read(std::string& out);
  // Encrypts `size` bytes of plaintext into the output. False on failure.
  bool write(const char* data, std::size_t size);
  // True when ciphertext is waiting to be sent.
  bool has_output() const noexcept;
  // Moves the ciphertext waiting to be sent to `out` (replacing its content).
  void take_output(std::string& out);
  const std::string& error() const noexcept { return error_; }

 private:
  void fail_from_queue(const char* during);

  const tls_context& context_;
  ssl_st* ssl_ = nullptr;
  bio_st* rbio_ = nullptr;  // owned by ssl_
  bio_st* wbio_ = nullptr;  // owned by ssl_
  std::string error_;
};

}  // namespace redsync::detail
