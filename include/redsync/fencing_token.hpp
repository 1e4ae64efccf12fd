#pragma once

/// \file
/// `redsync::fencing_token`: the number a lock's holder passes to the
/// resource it protects. Printable with `operator<<` (and, through
/// <redsync/fmt.hpp>, with {fmt}) as its decimal value.

#include <redsync/export.hpp>

#include <compare>
#include <cstdint>
#include <iosfwd>

namespace redsync {

/// A number that strictly increases with each successive holder of a name
/// (see `Mutex::token()` for the exact assumption).
/// A distinct type so it is never confused with a lock value.
///
/// \code
/// std::cout << "token " << m.token() << "\n";        // "token 42"
/// storage.write(key, data, m.token().value);         // the number itself
/// \endcode
struct fencing_token {
  /// The token; 0 means "none" (before the first acquisition). Pass it to
  /// the protected resource as a 64-bit unsigned integer.
  std::uint64_t value = 0;
  friend auto operator<=>(const fencing_token&, const fencing_token&) = default;
};

/// Writes `t.value` in decimal, as the stream writes a `std::uint64_t` (its
/// flags and width apply).
REDSYNC_API std::ostream& operator<<(std::ostream& out, fencing_token t);

}  // namespace redsync
