// RESP: commands encoded as hiredis' formatter would, replies read with its
// reader into owned values, within an element budget.

#include "transport/resp.hpp"

#include "transport/node_pool.hpp"

#include <hiredis/hiredis.h>

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <new>
#include <stdexcept>

// hiredis 0.14 declares the reader in <hiredis/read.h> (included by
// hiredis.h); 1.x keeps the same redisReader* functions, so only those are
// used here.

namespace redsync::detail {

void append_command(std::string& out, const std::vector<std::string_view>& argv) {
  // The multi-bulk request hiredis' redisFormatCommandArgv writes, byte for
  // byte ("*<argc>\r\n", then "$<len>\r\n<arg>\r\n" per argument), written
  // directly: hiredis formats each length with sprintf into a buffer of its
  // own that was then copied here, which made encoding a command per
  // acquisition the largest single cost of the library's own work per lock
  // + unlock cycle (issue 34).
  std::size_t size = 1 + std::numeric_limits<std::size_t>::digits10 + 1 + 2;
  for (const auto a : argv) size += 1 + std::numeric_limits<std::size_t>::digits10 + 1 + 2 + a.size() + 2;
  out.reserve(out.size() + size);
  const auto header = [&out](char kind, std::size_t n) {
    std::array<char, 2 + std::numeric_limits<std::size_t>::digits10 + 1 + 2> buf;
    buf[0] = kind;
    char* end = std::to_chars(buf.data() + 1, buf.data() + buf.size() - 2, n).ptr;
    *end++ = '\r';
    *end++ = '\n';
    out.append(buf.data(), static_cast<std::size_t>(end - buf.data()));
  };
  header('*', argv.size());
  for (const auto a : argv) {
    header('$', a.size());
    // An empty string_view may carry a null pointer: nothing to copy then.
    if (!a.empty()) out.append(a.data(), a.size());
    out.append("\r\n", 2);
  }
}

wire_command encode_command(const std::vector<std::string_view>& argv) {
  std::string wire;
  append_command(wire, argv);
  return std::make_shared<const std::string>(std::move(wire));
}

namespace {

reply convert(const redisReply* r) {
  reply out;
  switch (r->type) {
    case REDIS_REPLY_STATUS: out.type = reply::kind::status; break;
    case REDIS_REPLY_ERROR: out.type = reply::kind::error; break;
    case REDIS_REPLY_STRING: out.type = reply::kind::string; break;
    case REDIS_REPLY_INTEGER: out.type = reply::kind::integer; break;
    case REDIS_REPLY_NIL: out.type = reply::kind::nil; break;
    case REDIS_REPLY_ARRAY: out.type = reply::kind::array; break;
#ifdef REDIS_REPLY_BOOL
    // RESP3 kinds (hiredis 1.x) only appear after HELLO 3, which we never
    // send; map them onto the closest RESP2 kind anyway.
    case REDIS_REPLY_BOOL: out.type = reply::kind::integer; break;
#endif
#ifdef REDIS_REPLY_MAP
    case REDIS_REPLY_MAP:
    case REDIS_REPLY_SET:
    case REDIS_REPLY_PUSH: out.type = reply::kind::array; break;
#endif
    default: out.type = reply::kind::string; break;  // DOUBLE, VERB, BIGNUM: text in str
  }
  if (out.type == reply::kind::integer) out.integer = r->integer;
  if (out.type == reply::kind::array) {
    out.elements.reserve(r->elements);
    for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
  } else if (r->str != nullptr) {
    out.str.assign(r->str, r->len);
  }
  return out;
}

// hiredis' own array constructor (its reply objects are kept), behind a
// check of the reader's element budget.
using create_array_fn = decltype(redisReplyObjectFunctions::createArray);
create_array_fn default_create_array = nullptr;

redisReplyObjectFunctions* bounded_functions(const redisReplyObjectFunctions* defaults) {
  static redisReplyObjectFunctions functions = [defaults] {
    redisReplyObjectFunctions f = *defaults;
    default_create_array = f.createArray;
    // The count is an int in hiredis 0.14 and a size_t in 1.x.
    f.createArray = [](const redisReadTask* task, auto elements) -> void* {
      auto* budget = static_cast<resp_reader::element_budget*>(task->privdata);
      const auto count = static_cast<std::size_t>(elements);
      if (count > max_reply_elements - budget->declared) {
        budget->exceeded = true;
        return nullptr;  // hiredis then fails the reader ("Out of memory")
      }
      budget->declared += count;
      return default_create_array(task, elements);
    };
    return f;
  }();
  return &functions;
}

}  // namespace

resp_reader::resp_reader() : reader_(redisReaderCreate()) {
  if (reader_ == nullptr) throw std::bad_alloc();
  reader_->fn = bounded_functions(reader_->fn);
  reader_->privdata = &budget_;
}

resp_reader::~resp_reader() {
  redisReaderFree(reader_);
}

bool resp_reader::feed(const char* data, std::size_t size) {
  if (!error_.empty()) return false;
  if (redisReaderFeed(reader_, data, size) != REDIS_OK) {
    error_ = reader_->errstr[0] != '\0' ? reader_->errstr : "out of memory";
    return false;
  }
  return true;
}

resp_reader::status resp_reader::next(reply& out) {
  if (!error_.empty()) return status::protocol_error;
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    if (budget_.exceeded) {
      error_ = fmt::format("a reply of more than {} elements", max_reply_elements);
    } else {
      error_ = reader_->errstr[0] != '\0' ? reader_->errstr : "protocol error";
    }
    return status::protocol_error;
  }
  if (raw == nullptr) return status::incomplete;
  budget_.declared = 0;  // the next reply starts afresh
  auto* r = static_cast<redisReply*>(raw);
  try {
    out = convert(r);
  } catch (...) {
    freeReplyObject(r);
    throw;
  }
  freeReplyObject(r);
  return status::reply;
}

}  // namespace redsync::detail
