// Test harness: a throw-away certificate authority for the TLS tests, made
// with OpenSSL's C API (no `openssl` binary needed), in its own temporary
// directory that the destructor removes.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace redsync::test {

/// A certificate and its key, as PEM files.
struct issued_cert {
  std::string cert_file;
  std::string key_file;
};

/// What issue() puts in a certificate. Validity is relative to now.
struct cert_request {
  /// File name stem and subject CN, e.g. "server".
  std::string name = "server";
  /// subjectAltName DNS entries. Default {"localhost"}.
  std::vector<std::string> dns{"localhost"};
  /// subjectAltName IP entries. Default {"127.0.0.1"}.
  std::vector<std::string> ips{"127.0.0.1"};
  /// Valid from now + not_before to now + not_after. Default -1 h .. +1 day.
  std::chrono::seconds not_before = std::chrono::hours{-1};
  std::chrono::seconds not_after = std::chrono::hours{24};
};

/// A self-signed CA (EC P-256, SHA-256) that issues server and client
/// certificates. Throws std::runtime_error with OpenSSL's reason on failure.
/// Not thread-safe.
class test_ca {
 public:
  /// `name` is the CA's CN; distinct CAs get distinct names.
  explicit test_ca(std::string name = "redsync test CA");
  ~test_ca();
  test_ca(const test_ca&) = delete;
  test_ca& operator=(const test_ca&) = delete;

  /// The CA certificate (PEM), for tls.ca_file / --tls-ca-cert-file.
  const std::string& ca_file() const { return ca_file_; }
  /// A directory holding the CA certificate under its subject hash
  /// (`<hash>.0`), the layout tls.ca_dir expects.
  const std::string& ca_dir() const { return ca_dir_; }
  /// The temporary directory every file is written to.
  const std::string& dir() const { return dir_; }

  /// Issues a certificate signed by this CA, usable by servers and clients,
  /// written to `<dir>/<name>.pem` and `<dir>/<name>.key`.
  issued_cert issue(const cert_request& request = {});

 private:
  struct keys;
  std::string dir_;
  std::string ca_file_;
  std::string ca_dir_;
  keys* keys_ = nullptr;
  long serial_ = 1;
};

}  // namespace redsync::test
