#pragma once

// RESP codec internals: a push parser over hiredis' redisReader (feed bytes,
// pull owned replies). No I/O here; the connection moves the bytes.
// encode_command() is declared in node_pool.hpp.

#include "reply.hpp"

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

 private:
  redisReader* reader_;
  std::string error_;
};

}  // namespace redsync::detail
