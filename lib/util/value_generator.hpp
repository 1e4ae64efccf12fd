#pragma once

// Lock values: 16 random bytes from the OS CSPRNG, base64-encoded. A value
// only has to be unique among all holders of a lock name for as long as the
// lock can live; 128 random bits make a collision negligible.

#include <span>
#include <string>

namespace redsync::detail {

/// 16 bytes from the OS CSPRNG as standard padded base64: 24 characters,
/// the last two "==". Thread-safe. Throws std::system_error when neither
/// getrandom(2) nor /dev/urandom can supply bytes.
std::string random_value();

/// Fills `out` from getrandom(2), or from /dev/urandom where getrandom is
/// unavailable. Thread-safe. Throws std::system_error when both fail.
void fill_random(std::span<unsigned char> out);

/// Fills `out` from /dev/urandom (the fallback of fill_random; exposed so
/// tests can exercise it). Throws std::system_error on failure.
void fill_from_urandom(std::span<unsigned char> out);

/// RFC 4648 base64 with the standard alphabet and '=' padding.
std::string base64_encode(std::span<const unsigned char> bytes);

}  // namespace redsync::detail
