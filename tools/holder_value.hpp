// The values `redsync lock` stores on the nodes, and their decoding for
// `redsync status`: who asked for the lock (user, host, pid) and when, plus
// 16 random bytes that keep every acquisition's value unique, as the
// library's default value (those bytes alone) does.
//
//   redsync:1:USER@HOST:PID:UNIX_MS:RANDOM
//
// USER and HOST are percent-encoded outside [A-Za-z0-9._-]; UNIX_MS is when
// the run started to acquire (wall clock, milliseconds since the epoch);
// RANDOM is the 16 bytes in unpadded base64url (22 characters).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace redsync::cli {

struct holder_identity {
  std::string user;
  std::string host;
  long long pid = 0;
  /// When that `redsync lock` run started to acquire the lock: it has held
  /// it since then at the earliest (later if it had to wait).
  std::chrono::system_clock::time_point since{};
};

/// A new value for this process, asking for the lock now. Throws
/// std::system_error when the OS has no random bytes to give.
std::string make_holder_value();

/// The byte an RWMutex's reader puts before the value it was given
/// (lib/redlock/scripts/lock_scripts.hpp: reader_value_tag), in its entry
/// in the line and in the readers' set: `redsync lock --shared` stores
/// this byte, then a value of make_holder_value(). No writer's value
/// starts with it.
inline constexpr char reader_tag = '\x01';

/// Whether `value` is a reader's (it starts with reader_tag).
inline bool is_reader_value(std::string_view value) {
  return !value.empty() && value.front() == reader_tag;
}

/// The identity in a value made by make_holder_value(), a writer's or (after
/// reader_tag) a reader's; nullopt for any other value (another client's,
/// or a library default).
std::optional<holder_identity> decode_holder_value(std::string_view value);

/// "2024-05-01T12:00:01.123Z (3.2 s ago)".
std::string describe_since(std::chrono::system_clock::time_point since,
                           std::chrono::system_clock::time_point now);

/// "root@web1 pid 4242, since 2024-05-01T12:00:01.123Z (3.2 s ago)".
std::string describe_holder(const holder_identity& h, std::chrono::system_clock::time_point now);

}  // namespace redsync::cli
