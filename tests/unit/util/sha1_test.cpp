#include "util/sha1.hpp"

#include <doctest/doctest.h>

#include <string>

using redsync::detail::sha1_hex;

// The digest is OpenSSL's (lib/util/sha1.cpp); these vectors pin our hex
// form of it, and that the wrapper hashes every byte it is given.
// Expected digests: FIPS 180-1 / RFC 3174 test vectors, and `sha1sum` for
// the rest (runs of 'a' whose lengths sit on the padding boundaries).

TEST_CASE("sha1_hex matches the FIPS 180-1 test vectors") {
  CHECK(sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  CHECK(sha1_hex(std::string(1'000'000, 'a')) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST_CASE("sha1_hex of the empty string is the well-known digest") {
  CHECK(sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

TEST_CASE("sha1_hex pads correctly at every block boundary") {
  struct vector {
    std::size_t length;
    const char* digest;
  };
  // 55: padding fits in the block; 56..63: it spills into a second block;
  // 64/65: a full block then a short tail; 119/120: the same edge one block on.
  const vector vectors[] = {
      {55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"},  {56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"},
      {63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5"},  {64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"},
      {65, "11655326c708d70319be2610e8a57d9a5b959d3b"},  {119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56"},
      {120, "f34c1488385346a55709ba056ddd08280dd4c6d6"}, {128, "ad5b3fdbcb526778c2839d2f151ea753995e26a0"},
  };
  for (const vector& v : vectors) {
    CAPTURE(v.length);
    CHECK(sha1_hex(std::string(v.length, 'a')) == v.digest);
  }
}

TEST_CASE("sha1_hex treats every byte value, including NUL and high bytes, as data") {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  CHECK(sha1_hex(all_bytes) == "4916d6bdb7f78e6803698cab32d1586ea457dfc8");
}

TEST_CASE("sha1_hex returns 40 lowercase hex digits") {
  const std::string digest = sha1_hex("redsync");
  CHECK(digest.size() == 40);
  CHECK(digest.find_first_not_of("0123456789abcdef") == std::string::npos);
}
