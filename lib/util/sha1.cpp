// SHA-1 (FIPS 180-4), for script ids: what SCRIPT LOAD returns.

#include "util/sha1.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace redsync::detail {
namespace {

// FIPS 180-1 section 7: one 512-bit block into the running state.
void compress(std::array<std::uint32_t, 5>& h, const unsigned char* p) {
  std::array<std::uint32_t, 80> w{};
  for (std::size_t t = 0; t < 16; ++t) {
    w[t] = std::uint32_t{p[4 * t]} << 24 | std::uint32_t{p[4 * t + 1]} << 16 |
           std::uint32_t{p[4 * t + 2]} << 8 | std::uint32_t{p[4 * t + 3]};
  }
  for (std::size_t t = 16; t < 80; ++t) {
    w[t] = std::rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
  }

  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (std::size_t t = 0; t < 80; ++t) {
    std::uint32_t f = 0;
    std::uint32_t k = 0;
    if (t < 20) {
      f = (b & c) | (~b & d);
      k = 0x5A827999;
    } else if (t < 40) {
      f = b ^ c ^ d;
      k = 0x6ED9EBA1;
    } else if (t < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8F1BBCDC;
    } else {
      f = b ^ c ^ d;
      k = 0xCA62C1D6;
    }
    const std::uint32_t temp = std::rotl(a, 5) + f + e + w[t] + k;
    e = d;
    d = c;
    c = std::rotl(b, 30);
    b = a;
    a = temp;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

}  // namespace

std::string sha1_hex(std::string_view data) {
  std::array<std::uint32_t, 5> h{0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};

  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const std::size_t full = data.size() / 64 * 64;
  for (std::size_t i = 0; i < full; i += 64) compress(h, bytes + i);

  // Padding: a 1 bit, zeros, then the message length in bits as a 64-bit
  // big-endian number, filling one block, or two when fewer than 9 bytes
  // remain after the tail (tail length 56..63).
  std::array<unsigned char, 128> tail{};
  const std::size_t rest = data.size() - full;
  for (std::size_t i = 0; i < rest; ++i) tail[i] = bytes[full + i];
  tail[rest] = 0x80;
  const std::size_t tail_size = rest < 56 ? 64 : 128;
  const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
  for (std::size_t i = 0; i < 8; ++i) {
    tail[tail_size - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  }
  for (std::size_t i = 0; i < tail_size; i += 64) compress(h, tail.data() + i);

  static constexpr char digits[] = "0123456789abcdef";
  std::string hex(40, '0');
  for (std::size_t i = 0; i < 5; ++i) {
    for (std::size_t j = 0; j < 8; ++j) {
      hex[8 * i + j] = digits[(h[i] >> (28 - 4 * j)) & 0xF];
    }
  }
  return hex;
}

}  // namespace redsync::detail
