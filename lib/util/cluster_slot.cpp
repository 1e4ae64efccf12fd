// CRC16 and hash tags as Redis Cluster computes them, and the table of one
// short tag per slot.

#include "util/cluster_slot.hpp"

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace redsync::detail {
namespace {

// The table-driven CRC16-CCITT (XMODEM), built at compile time.
constexpr std::array<std::uint16_t, 256> make_crc_table() {
  std::array<std::uint16_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
    t[i] = static_cast<std::uint16_t>(crc & 0xffff);
  }
  return t;
}
constexpr std::array<std::uint16_t, 256> crc_table = make_crc_table();

constexpr std::string_view tag_alphabet = "0123456789abcdefghijklmnopqrstuvwxyz";
constexpr std::size_t max_tag_length = 4;

struct tag_table {
  std::array<std::array<char, max_tag_length + 1>, cluster_slots> tags{};  // NUL-terminated
  std::array<std::uint8_t, cluster_slots> lengths{};
};

// Enumerates strings by length, then in alphabet order, and keeps the first
// that reaches each slot. 36^3 strings do not reach every slot; 36^4 do
// (checked: the build of the table fails loudly otherwise).
const tag_table& tags() {
  static const tag_table table = [] {
    tag_table t;
    std::size_t filled = 0;
    std::string s;
    for (std::size_t len = 1; len <= max_tag_length && filled < cluster_slots; ++len) {
      std::size_t count = 1;
      for (std::size_t i = 0; i < len; ++i) count *= tag_alphabet.size();
      s.assign(len, tag_alphabet[0]);
      for (std::size_t n = 0; n < count && filled < cluster_slots; ++n) {
        std::size_t rest = n;
        for (std::size_t i = len; i-- > 0;) {
          s[i] = tag_alphabet[rest % tag_alphabet.size()];
          rest /= tag_alphabet.size();
        }
        const std::uint16_t slot = key_slot(s);
        if (t.lengths[slot] != 0) continue;
        s.copy(t.tags[slot].data(), len);
        t.lengths[slot] = static_cast<std::uint8_t>(len);
        ++filled;
      }
    }
    if (filled < cluster_slots)
      throw std::logic_error("slot_tag: some slot has no tag of at most 4 characters");
    return t;
  }();
  return table;
}

}  // namespace

std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (const char c : data) {
    crc = static_cast<std::uint16_t>((crc << 8) ^
                                     crc_table[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
  }
  return crc;
}

std::string_view hash_tag(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const std::size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

bool has_hash_tag(std::string_view key) noexcept {
  return hash_tag(key).size() != key.size();
}

std::uint16_t key_slot(std::string_view key) noexcept {
  return static_cast<std::uint16_t>(crc16(hash_tag(key)) & (cluster_slots - 1));
}

std::string_view slot_tag(std::uint16_t slot) {
  if (slot >= cluster_slots)
    throw std::out_of_range("slot_tag: slot " + std::to_string(slot) + " is not below 16384");
  const tag_table& t = tags();
  return {t.tags[slot].data(), t.lengths[slot]};
}

}  // namespace redsync::detail
