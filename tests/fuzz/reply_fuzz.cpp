// libFuzzer target: replies from the nodes, the way the library reads them.
//
// The input is a byte stream from a node. It goes through the RESP reader the
// connections use (lib/resp, hiredis underneath), fed whole and again one
// byte at a time: both must yield the same replies and end in the same state.
// Every complete reply then goes where a node's answer can go: the server
// error classifier (as the fan-out calls it, also behind a failed handshake),
// every script answer's classifier and reader, and the reading of INFO. Each
// must return one of the outcomes it documents, and what the readers return
// must be usable as the flows use it.

#include "fuzz_check.hpp"
#include "redlock/engine/round.hpp"
#include "redlock/quorum.hpp"
#include "redlock/scripts/fast_acquire.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "redlock/trust/node_trust.hpp"
#include "transport/resp.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace {

using namespace redsync::detail;
using redsync::node_status;
using redsync::server_error;
using redsync::fuzz::check;

struct stream {
  std::vector<reply> replies;
  bool failed = false;
};

// Feeds `data` to a fresh reader `chunk` bytes at a time, pulling every
// reply after each feed.
stream read_stream(const char* data, std::size_t size, std::size_t chunk) {
  stream out;
  resp_reader reader;
  reply r;
  for (std::size_t at = 0; at < size && !out.failed; at += chunk) {
    if (!reader.feed(data + at, std::min(chunk, size - at))) {
      check(!reader.error().empty(), "a failed feed without an error");
      out.failed = true;
      break;
    }
    for (;;) {
      const auto st = reader.next(r);
      if (st == resp_reader::status::incomplete) break;
      if (st == resp_reader::status::protocol_error) {
        check(!reader.error().empty(), "a protocol error without an error");
        check(reader.next(r) == resp_reader::status::protocol_error, "a reader recovered from an error");
        out.failed = true;
        break;
      }
      out.replies.push_back(std::move(r));
      r = reply{};
    }
  }
  return out;
}

bool same(const reply& a, const reply& b) {
  if (a.type != b.type || a.str != b.str || a.integer != b.integer || a.elements.size() != b.elements.size())
    return false;
  for (std::size_t i = 0; i < a.elements.size(); ++i)
    if (!same(a.elements[i], b.elements[i])) return false;
  return true;
}

bool is_one_of(node_status s, std::initializer_list<node_status> allowed) {
  for (node_status a : allowed)
    if (s == a) return true;
  return false;
}

void check_window(std::chrono::milliseconds w) {
  // node_trust keeps the longest window it reads and waits that long before
  // a repair: it must be a duration the library's arithmetic can hold.
  check(w.count() >= 0 && w <= max_expiry, "a recorded window outside 0..max_expiry");
  const auto now = std::chrono::steady_clock::now();
  check(saturating_add(now, w) >= now, "a repair time before now");
}

void classify(const reply& r) {
  if (r.is_error()) {
    // The fan-out classifies error replies, alone or behind a handshake
    // failure ("AUTH failed: <reply>").
    const server_error e = classify_server_error(r.str);
    check(e != server_error::none, "an error reply classified as no error");
    // (A reply that itself starts with "AUTH failed" is unwrapped once
    // more when it comes alone; no server words an error so.)
    const server_error h = classify_server_error("AUTH failed: " + r.str);
    if (!r.str.starts_with("AUTH failed")) check(h == e, "a handshake failure classified unlike its reply");
    (void)classify_server_error("SELECT failed: " + r.str);
  }

  const node_status acquire = classify_acquire(r);
  check(is_one_of(acquire, {node_status::ok, node_status::taken, node_status::reply_error}),
        "classify_acquire outside ok/taken/reply_error");
  if (acquire == node_status::ok)
    check(r.elements.at(0).type == reply::kind::integer && r.elements[0].integer > 0,
          "an acquisition counted without a positive token");
  check(is_one_of(classify_three_way(r),
                  {node_status::ok, node_status::missing, node_status::taken, node_status::reply_error}),
        "classify_three_way outside ok/missing/taken/reply_error");
  check(is_one_of(classify_fence(r), {node_status::ok, node_status::missing, node_status::reply_error}),
        "classify_fence outside ok/missing/reply_error");

  if (const auto vote = read_acquire_vote(r)) check_window(vote->window);
  // The semaphore's acquire answer: a grant is also a vote node_trust can
  // read, and a mismatch is never counted.
  const node_status granted = classify_semaphore_acquire(r);
  check(is_one_of(granted, {node_status::ok, node_status::taken, node_status::reply_error}),
        "classify_semaphore_acquire outside ok/taken/reply_error");
  const auto answer = read_semaphore_answer(r);
  if (granted != node_status::reply_error) check(answer.has_value(), "a counted semaphore answer unreadable");
  if (answer && answer->stored_permits) check(granted == node_status::reply_error, "a mismatch counted");
  // A refusal for the other kind (rule X) is a refusal, never a yes.
  if (semaphore_held_as_mutex(r)) check(granted == node_status::taken, "a name held as a mutex not refused");
  if (acquire_held_as_semaphore(r))
    check(acquire == node_status::taken, "a name held as a semaphore not refused");
  // EXEC's answer to the acquisition transaction: a yes only where SET won,
  // and then in the script's shape.
  const reply fast = fast_acquire_answer(reply(r));  // a copy: r is checked against it below
  if (classify_acquire(fast) == node_status::ok) {
    check(r.type == reply::kind::array && r.elements.size() == 4 && r.elements[0].type == reply::kind::status,
          "a transaction counted as a yes without a won SET");
    check(fast.type == reply::kind::array && fast.elements.size() == 4 &&
              fast.elements[1].type == reply::kind::string && fast.elements[2].type == reply::kind::integer &&
              fast.elements[3].type == reply::kind::integer,
          "a transaction yes not in the acquire script's shape");
  }
  if (const auto rec = read_node_record(r)) {
    check_window(rec->window);
    check(!rec->has_counter || !r.elements[0].str.empty(), "a counter read from an empty field");
  }

  const server_identity id = identify_server(r);
  check(id.identity.empty() != id.problem.empty(), "INFO gave both or neither an identity and a problem");
  if (r.is_error()) check(!id.problem.empty(), "a refused INFO identified a server");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  const stream whole = read_stream(bytes, size, size == 0 ? 1 : size);
  const stream split = read_stream(bytes, size, 1);
  check(whole.failed == split.failed, "fed whole and byte by byte, the reader ends differently");
  check(whole.replies.size() == split.replies.size(),
        "fed whole and byte by byte, the reader yields more or less");
  for (std::size_t i = 0; i < whole.replies.size(); ++i) {
    check(same(whole.replies[i], split.replies[i]),
          "fed whole and byte by byte, the reader yields other replies");
    classify(whole.replies[i]);
  }
  return 0;
}
