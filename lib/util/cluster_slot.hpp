#pragma once

// Redis Cluster's key-to-slot function, as the server computes it
// (cluster.c, keyHashSlot): CRC16-CCITT (XMODEM) of the key's hash tag,
// modulo 16384. The hash tag is the text between the first '{' and the
// first '}' after it, when that text is not empty; otherwise the whole key.
// Sharded pub/sub channels map to slots the same way.
//
// Also the other direction: for each slot, a short tag whose slot it is, so
// a per-slot key (the node record of a cluster member, docs/cluster.md) can
// be named to live in a chosen slot.

#include <cstdint>
#include <string_view>

namespace redsync::detail {

inline constexpr std::uint16_t cluster_slots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), as Redis uses.
std::uint16_t crc16(std::string_view data) noexcept;

// The part of `key` that decides its slot: the hash tag if there is one,
// else the key.
std::string_view hash_tag(std::string_view key) noexcept;

// The slot of `key` (0..16383).
std::uint16_t key_slot(std::string_view key) noexcept;

// True when `key` has a non-empty hash tag ("a{b}c", not "a{}c" or "a{b").
bool has_hash_tag(std::string_view key) noexcept;

// A short string (at most 4 characters of [0-9a-z]) whose slot is `slot`
// (< cluster_slots): the shortest such, the first in length-then-alphabet
// order, so every client names the same one. Computed once per process, on
// first use (about a million CRCs: milliseconds).
std::string_view slot_tag(std::uint16_t slot);

}  // namespace redsync::detail
