#pragma once

// RESP codec internals: a push parser over hiredis' redisReader (feed bytes,
// pull owned replies). No I/O here; the connection moves the bytes.
// encode_command() and append_command() are declared in node_pool.hpp.

#include "transport/reply.hpp"

#include <cstddef>
#include <string>

struct redisReader;

namespace redsync::detail {

class resp_reader {
 public:
  enum class status {
    reply,           // `out` holds the next complete reply
    incomplete,      // feed more bytes
    protocol_error,  // the stream is unusable; see error()
  };

  resp_reader();
  ~resp_reader();
  resp_reader(const resp_reader&) = delete;
  resp_reader& operator=(const resp_reader&) = delete;

  // Appends bytes to the parse buffer (copied). Returns false once the reader
  // is in the error state (then error() says why).
  bool feed(const char* data, std::size_t size);
  // Pulls the next complete reply. After protocol_error every later call
  // returns protocol_error again.
  status next(reply& out);
  const std::string& error() const noexcept { return error_; }

  // Elements the reply being read has declared so far (every array's count,
  // at any depth), kept by the reader's hiredis callbacks (resp.cpp).
  struct element_budget {
    std::size_t declared = 0;
    bool exceeded = false;
  };

 private:
  redisReader* reader_;
  element_budget budget_;
  std::string error_;
};

// The most elements one reply may declare, counting every array in it. No
// reply the library reads comes close (scripts answer at most 6, pub/sub
// messages 3, INFO is one string), while hiredis allocates an array's
// element pointers as soon as it reads the count: "*2147483647\r\n" alone
// would take 16 GiB. A reply that declares more is a protocol error.
inline constexpr std::size_t max_reply_elements = 65536;

}  // namespace redsync::detail
