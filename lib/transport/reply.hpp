#pragma once

// A parsed RESP reply, owned (copied out of hiredis' redisReply so nothing
// hiredis-allocated escapes the codec).

#include <string>
#include <vector>

namespace redsync::detail {

struct reply {
  enum class kind { status, error, string, integer, nil, array };
  kind type = kind::nil;
  std::string str;              // status, error, string
  long long integer = 0;        // integer
  std::vector<reply> elements;  // array

  bool is_error() const noexcept { return type == kind::error; }
};

}  // namespace redsync::detail
