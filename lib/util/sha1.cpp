// SHA-1 by OpenSSL's one-shot EVP_Digest: the digest itself is libcrypto's,
// only the hex form (what SCRIPT LOAD returns) is ours.

#include "util/sha1.hpp"

#include <openssl/evp.h>

#include <array>
#include <stdexcept>

namespace redsync::detail {

std::string sha1_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  // EVP_sha1() is a static, never-freed method table; EVP_Digest fetches the
  // implementation from the default provider, which always has SHA-1 (the
  // FIPS provider too), so a failure means a broken OpenSSL install.
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha1(), nullptr) != 1 || size != 20) {
    throw std::runtime_error("OpenSSL could not compute a SHA-1 digest (EVP_Digest failed)");
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex(2 * size, '0');
  for (unsigned int i = 0; i < size; ++i) {
    hex[2 * i] = digits[digest[i] >> 4];
    hex[2 * i + 1] = digits[digest[i] & 0xF];
  }
  return hex;
}

}  // namespace redsync::detail
