#include "test_ca.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace redsync::test {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& what) {
  std::string reasons;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    reasons += std::string(reasons.empty() ? "" : "; ") + buf;
  }
  throw std::runtime_error("test_ca: " + what + (reasons.empty() ? "" : ": " + reasons));
}

struct x509_deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct pkey_deleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using x509_ptr = std::unique_ptr<X509, x509_deleter>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_deleter>;

pkey_ptr make_key() {
  pkey_ptr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) fail("EC key generation");
  return key;
}

void add_ext(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  if (ext == nullptr) fail("extension " + value);
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) fail("adding extension " + value);
}

// A certificate for `key` named `cn`, signed by `issuer_key` (issuer null:
// self-signed).
x509_ptr make_cert(EVP_PKEY* key, const std::string& cn, long serial, const cert_request& when, X509* issuer,
                   EVP_PKEY* issuer_key, bool ca, const std::string& san) {
  x509_ptr cert(X509_new());
  if (!cert) fail("X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), static_cast<long>(when.not_before.count()));
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(when.not_after.count()));
  if (X509_set_pubkey(cert.get(), key) != 1) fail("X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer != nullptr ? issuer : cert.get(), cert.get(), nullptr, nullptr, 0);
  if (ca) {
    add_ext(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(cert.get(), &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_ext(cert.get(), &ctx, NID_subject_key_identifier, "hash");
  } else {
    add_ext(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature");
    add_ext(cert.get(), &ctx, NID_ext_key_usage, "serverAuth,clientAuth");
    add_ext(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always");
    if (!san.empty()) add_ext(cert.get(), &ctx, NID_subject_alt_name, san);
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) fail("X509_sign");
  return cert;
}

void write_cert(const std::string& path, X509* cert) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("test_ca: cannot write " + path);
  const int ok = PEM_write_X509(f, cert);
  std::fclose(f);
  if (ok != 1) fail("PEM_write_X509 " + path);
}

void write_key(const std::string& path, EVP_PKEY* key) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("test_ca: cannot write " + path);
  const int ok = PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  if (ok != 1) fail("PEM_write_PrivateKey " + path);
}

std::string make_temp_dir() {
  std::string base = "/tmp";
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') base = t;
  std::string tmpl = base + "/redsync-ca-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("test_ca: mkdtemp " + tmpl);
  return tmpl;
}

}  // namespace

struct test_ca::keys {
  pkey_ptr key;
  x509_ptr cert;
};

test_ca::test_ca(std::string name) : dir_(make_temp_dir()) {
  try {
    auto k = std::make_unique<keys>();
    k->key = make_key();
    k->cert = make_cert(k->key.get(), name, serial_++, cert_request{.not_after = std::chrono::hours{48}},
                        nullptr, nullptr, true, "");
    ca_file_ = dir_ + "/ca.pem";
    write_cert(ca_file_, k->cert.get());
    ca_dir_ = dir_ + "/ca-dir";
    fs::create_directory(ca_dir_);
    char hashed[32];
    std::snprintf(hashed, sizeof hashed, "%08lx.0",
                  X509_NAME_hash_ex(X509_get_subject_name(k->cert.get()), nullptr, nullptr, nullptr));
    fs::copy_file(ca_file_, ca_dir_ + "/" + hashed);
    keys_ = k.release();
  } catch (...) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    throw;
  }
}

test_ca::~test_ca() {
  delete keys_;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

issued_cert test_ca::issue(const cert_request& request) {
  std::string san;
  for (const auto& d : request.dns) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : request.ips) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  pkey_ptr key = make_key();
  x509_ptr cert =
      make_cert(key.get(), request.name, serial_++, request, keys_->cert.get(), keys_->key.get(), false, san);
  issued_cert out{dir_ + "/" + request.name + ".pem", dir_ + "/" + request.name + ".key"};
  write_cert(out.cert_file, cert.get());
  write_key(out.key_file, key.get());
  return out;
}

}  // namespace redsync::test
