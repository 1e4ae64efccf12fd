// The SSL_CTX of a node (trust store, client certificate, verification) and
// one connection's TLS session over memory BIOs, with failures explained in
// OpenSSL's words.

#include "transport/tls_session.hpp"

#include <redsync/error.hpp>

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

namespace redsync::detail {

namespace {

// OpenSSL's error queue, oldest first, as "reason; reason" (ERR_error_string_n
// gives "error:0A000086:SSL routines::certificate verify failed"). Empties
// the queue.
std::string openssl_errors(bool* key_mismatch = nullptr) {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    if (key_mismatch != nullptr && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH) *key_mismatch = true;
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

// Adds every PEM certificate found in the regular files of `dir` to
// `store`; returns how many. A hashed directory given to OpenSSL as such is
// read lazily, during verification, which would be file I/O on the loop
// thread: everything is read here, at construction, instead.
int add_directory(X509_STORE* store, const std::filesystem::path& dir) {
  int added = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    BIO* in = BIO_new_file(entry.path().c_str(), "r");
    if (in == nullptr) continue;
    while (X509* cert = PEM_read_bio_X509(in, nullptr, nullptr, nullptr)) {
      // A certificate already in the store (the same CA under two names)
      // is not an error.
      if (X509_STORE_add_cert(store, cert) == 1) ++added;
      X509_free(cert);
    }
    BIO_free(in);
    ERR_clear_error();  // the end of each file reads as "no start line"
  }
  return added;
}

// The system's trust store, read now: its bundle file when there is one
// (Debian, Ubuntu, Fedora), else every certificate in its directory. The
// SSL_CERT_FILE and SSL_CERT_DIR variables are honoured as OpenSSL does.
void load_system_store(SSL_CTX* ctx) {
  const char* file_env = std::getenv(X509_get_default_cert_file_env());
  const std::string file = file_env != nullptr ? file_env : X509_get_default_cert_file();
  std::error_code ec;
  if (std::filesystem::is_regular_file(file, ec) &&
      SSL_CTX_load_verify_locations(ctx, file.c_str(), nullptr) == 1)
    return;
  ERR_clear_error();
  const char* dir_env = std::getenv(X509_get_default_cert_dir_env());
  std::string_view dirs = dir_env != nullptr ? dir_env : X509_get_default_cert_dir();
  while (!dirs.empty()) {
    const auto colon = dirs.find(':');
    const std::string dir(dirs.substr(0, colon));
    if (std::filesystem::is_directory(dir, ec)) add_directory(SSL_CTX_get_cert_store(ctx), dir);
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
  }
}

// An encrypted key must fail, not prompt for a pass phrase on the terminal
// (OpenSSL's default), which would block the constructor.
int no_passphrase(char*, int, int, void*) {
  return 0;
}

bool is_ip_literal(const std::string& name) {
  in6_addr a6{};
  in_addr a4{};
  return inet_pton(AF_INET, name.c_str(), &a4) == 1 || inet_pton(AF_INET6, name.c_str(), &a6) == 1;
}

[[noreturn]] void bad_file(std::string_view field, const std::string& path, const std::string& why) {
  throw config_error(fmt::format("node_options.tls.{} = \"{}\": {}", field, path, why));
}

// OpenSSL's messages for a missing file are vague ("system lib"): say what
// the system says first.
void require_readable_file(std::string_view field, const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) bad_file(field, path, "is a directory, not a file");
  std::ifstream in(path);
  if (!in) bad_file(field, path, fmt::format("cannot be read: {}", std::strerror(errno)));
}

}  // namespace

// ---- tls_context ------------------------------------------------------------

tls_context::tls_context(const node_options& node)
    : name_(node.tls.server_name.empty() ? node.host : node.tls.server_name),
      name_is_ip_(is_ip_literal(name_)),
      verify_(!node.tls.insecure_skip_verify) {
  const tls_options& o = node.tls;
  ERR_clear_error();
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (ctx_ == nullptr)
    throw config_error("node_options.tls: cannot create a TLS context: " + openssl_errors());
  // Owned from here: the destructor frees it if anything below throws.
  struct guard {
    tls_context* self;
    bool armed = true;
    ~guard() {
      if (armed) SSL_CTX_free(self->ctx_);
    }
  } g{this};

  // Redis speaks TLS 1.2 and 1.3; older versions are broken.
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  // The write BIO is drained after every SSL_write, and a record is never
  // retried from another buffer: a moving buffer is fine.
  SSL_CTX_set_mode(ctx_, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(ctx_, verify_ ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);

  // Renegotiation would make a write wait for a read; Redis never asks for it.
  SSL_CTX_set_options(ctx_, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_default_passwd_cb(ctx_, no_passphrase);

  if (o.ca_file.empty() && o.ca_dir.empty()) load_system_store(ctx_);
  if (!o.ca_file.empty()) {
    require_readable_file("ca_file", o.ca_file);
    if (SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr) != 1) {
      bad_file("ca_file", o.ca_file, "no PEM CA certificate in it: " + openssl_errors());
    }
  }
  if (!o.ca_dir.empty()) {
    // Read whole now (add_directory): a CA added to the directory later is
    // seen by the next Redsync, not by this one.
    std::error_code ec;
    if (!std::filesystem::is_directory(o.ca_dir, ec)) bad_file("ca_dir", o.ca_dir, "is not a directory");
    if (add_directory(SSL_CTX_get_cert_store(ctx_), o.ca_dir) == 0)
      bad_file("ca_dir", o.ca_dir, "no PEM CA certificate in any of its files");
  }
  if (!o.cert_file.empty()) {
    require_readable_file("cert_file", o.cert_file);
    if (SSL_CTX_use_certificate_chain_file(ctx_, o.cert_file.c_str()) != 1) {
      bad_file("cert_file", o.cert_file, "no PEM certificate in it: " + openssl_errors());
    }
  }
  if (!o.key_file.empty()) {
    require_readable_file("key_file", o.key_file);
    // Loading the key checks it against the certificate loaded above.
    bool mismatch = false;
    const bool loaded = SSL_CTX_use_PrivateKey_file(ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM) == 1;
    const bool matches = loaded && SSL_CTX_check_private_key(ctx_) == 1;
    if (!matches) {
      const std::string why = openssl_errors(&mismatch);
      if (mismatch || loaded) {
        bad_file("key_file", o.key_file,
                 fmt::format("does not match the certificate in tls.cert_file \"{}\": {}", o.cert_file, why));
      }
      bad_file("key_file", o.key_file, "no PEM private key in it (or it is encrypted): " + why);
    }
  }
  g.armed = false;
}

tls_context::~tls_context() {
  SSL_CTX_free(ctx_);
}

std::shared_ptr<const tls_context> make_tls_context(const node_options& node) {
  if (!node.tls.enabled) return nullptr;
  return std::make_shared<const tls_context>(node);
}

// ---- tls_session ------------------------------------------------------------

tls_session::tls_session(const tls_context& context) : context_(context) {
  ERR_clear_error();
  ssl_ = SSL_new(context_.get());
  rbio_ = BIO_new(BIO_s_mem());
  wbio_ = BIO_new(BIO_s_mem());
  if (ssl_ == nullptr || rbio_ == nullptr || wbio_ == nullptr) {
    BIO_free(rbio_);  // not yet owned by ssl_; BIO_free(nullptr) does nothing
    BIO_free(wbio_);
    rbio_ = wbio_ = nullptr;
    error_ = "cannot create a TLS session: " + openssl_errors();
    return;
  }
  // An empty read BIO means "wait for more", not end of stream.
  BIO_set_mem_eof_return(rbio_, -1);
  SSL_set_bio(ssl_, rbio_, wbio_);
  SSL_set_connect_state(ssl_);
  const std::string& name = context_.verify_name();
  // SNI only for DNS names (RFC 6066 forbids IP literals there).
  if (!context_.name_is_ip()) SSL_set_tlsext_host_name(ssl_, name.c_str());
  if (context_.verifies()) {
    const int ok = context_.name_is_ip() ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str())
                                         : SSL_set1_host(ssl_, name.c_str());
    if (ok != 1) error_ = fmt::format("cannot check the server's name \"{}\": {}", name, openssl_errors());
  }
}

tls_session::~tls_session() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // frees both BIOs
}

void tls_session::fail_from_queue(const char* during) {
  const unsigned long first = ERR_peek_error();
  // Without verification OpenSSL still records the chain's verdict: it is
  // not the cause of a failure then.
  const long verdict = context_.verifies() ? SSL_get_verify_result(ssl_) : X509_V_OK;
  std::string queue = openssl_errors();
  if (verdict != X509_V_OK) {
    error_ = fmt::format("certificate verify failed: {}", X509_verify_cert_error_string(verdict));
    if (verdict == X509_V_ERR_HOSTNAME_MISMATCH || verdict == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      error_ += fmt::format(" (expected \"{}\")", context_.verify_name());
    }
    return;
  }
  const int reason = ERR_GET_REASON(first);
  if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED) {
    // TLS 1.3: the client's handshake is over before the server checks the
    // client's certificate, so the refusal arrives as an alert on the first
    // read.
    error_ = "the server requires a client certificate (tls.cert_file, tls.key_file): " + queue;
    return;
  }
  if (queue.empty()) queue = "the server closed the TLS session unexpectedly";
  error_ = fmt::format("{}{}", during, queue);
}

tls_session::progress tls_session::handshake() {
  if (!error_.empty()) return progress::failed;
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) return progress::done;
  const int e = SSL_get_error(ssl_, rc);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return progress::pending;
  fail_from_queue("");
  return progress::failed;
}

void tls_session::feed(const char* data, std::size_t size) {
  if (rbio_ == nullptr) return;
  // A memory BIO grows as needed; it fails only when out of memory.
  if (BIO_write(rbio_, data, static_cast<int>(size)) != static_cast<int>(size) && error_.empty()) {
    error_ = "out of memory buffering TLS records";
  }
}

bool tls_session::read(std::string& out) {
  if (!error_.empty()) return false;
  char buf[16 * 1024];  // one TLS record's plaintext at most
  for (;;) {
    ERR_clear_error();
    std::size_t n = 0;
    const int rc = SSL_read_ex(ssl_, buf, sizeof buf, &n);
    if (rc == 1) {
      out.append(buf, n);
      continue;
    }
    const int e = SSL_get_error(ssl_, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return true;
    if (e == SSL_ERROR_ZERO_RETURN) {
      error_ = "the server ended the TLS session (close_notify)";
      return false;
    }
    fail_from_queue("");
    return false;
  }
}

bool tls_session::write(const char* data, std::size_t size) {
  if (!error_.empty()) return false;
  if (size == 0) return true;
  ERR_clear_error();
  std::size_t written = 0;
  // Into a memory BIO without partial writes: all of it, or an error.
  if (SSL_write_ex(ssl_, data, size, &written) != 1) {
    fail_from_queue("write: ");
    return false;
  }
  return true;
}

bool tls_session::has_output() const noexcept {
  return wbio_ != nullptr && BIO_ctrl_pending(wbio_) > 0;
}

void tls_session::take_output(std::string& out) {
  out.clear();
  if (wbio_ == nullptr) return;
  const std::size_t pending = BIO_ctrl_pending(wbio_);
  if (pending == 0) return;
  out.resize(pending);
  const int n = BIO_read(wbio_, out.data(), static_cast<int>(pending));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
}

}  // namespace redsync::detail
