#pragma once

// A node URI as error messages may show it: every secret in it becomes
// "***" (a password in the user info, user info that may be a password, and
// the value of any parameter clients read a password from, in any case or
// percent-encoding) and control characters become \xNN, since config errors
// end up in logs.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

class redacted_uri {
 public:
  // `uri` must outlive this object. `user_info_to_last_at` says where the
  // user info ends: at the last '@' (redis://, where a password may hold a
  // raw '@'), or else at an '@' before the path.
  redacted_uri(std::string_view uri, bool user_info_to_last_at);

  // `part` (a view into the URI) as it may be shown: every secret in it,
  // or the piece of one it holds, becomes "***", and control characters
  // become \xNN.
  std::string shown(std::string_view part) const;

 private:
  // A part of the URI that must not be shown: [pos, pos + len).
  struct span {
    std::size_t pos = 0;
    std::size_t len = 0;
  };

  static std::vector<span> find_secrets(std::string_view uri, bool user_info_to_last_at);

  std::string_view uri_;
  std::vector<span> secrets_;
};

// Text that is not a view into the URI (e.g. decoded from it) as it may be
// shown: control characters become \xNN (a NUL would cut what() short).
std::string printable(std::string_view text);

}  // namespace redsync::detail
