#pragma once

// What each script's answer means (scripts.hpp describes the answers): pure
// functions of one node's reply, no state and no I/O. The flows use them
// (acquisition, fencing, holder_operations, node_trust);
// tests/fuzz/reply_fuzz.cpp feeds them arbitrary replies. Error replies
// never reach them: round.cpp classifies
// those with classify_server_error.

#include "transport/reply.hpp"

#include <redsync/error.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace redsync::detail {

// acquire_script: ok where SET NX won on every name ({token > 0, ...});
// taken where it did not (a negative number, or nil); else reply_error.
node_status classify_acquire(const reply& r);

// acquire_script refused because a name is held as a semaphore (-5, rule X
// of semaphore_scripts.hpp). The transaction cannot tell (its SET NX just
// fails, nil): a waiting lock learns it from the script that follows.
bool acquire_held_as_semaphore(const reply& r);

// release_script, extend_script and check_script: 1 ok, 0 missing, -1
// taken; else reply_error.
node_status classify_three_way(const reply& r);

// fence_script: 1 ok, 0 missing (the name no longer holds our value); else
// reply_error.
node_status classify_fence(const reply& r);

// The parts of acquire_script's yes that decide whether the vote counts
// (node_trust::exclude_yes). Views into the reply it was read from.
struct acquire_vote {
  std::string_view record_identity;     // '' if the record names no server
  std::chrono::milliseconds age{0};     // since the server was first seen unverified; -1 if never
  std::chrono::milliseconds window{0};  // the longest expiry recorded on the node
  // A cluster member's answer: sha1 of the identity of the server that ran
  // the script (server_mark.hpp); '' in a standalone member's answer.
  std::string_view server_mark;
};

// The acquire script's yes says the caller is in a line on that node (its
// fifth element; the transaction's yes has none: never in line).
bool acquire_answer_in_line(const reply& r);

// nullopt unless the answer is {token, identity, age, window[, in line or
// the semaphore's slots[, server mark]]}, with the
// window in 0..max_expiry as every client writes it (a record that says
// otherwise is corrupt, and a node's vote must not rest on it).
std::optional<acquire_vote> read_acquire_vote(const reply& r);

// record_read_script's answer, as node_trust's looks use it. Views into the
// reply it was read from.
struct node_record {
  bool has_counter = false;  // the record holds a fencing counter
  std::int64_t fence = 0;
  std::string_view identity;            // the server the record was last verified for
  std::int64_t now_ms = 0;              // the server's clock
  std::string_view mark;                // the repair's mark, '' if none
  std::int64_t mark_ms = -1;            // the server ms the mark was set; -1 if no (well-formed) mark
  std::string_view mark_identity;       // the server identity the mark names
  std::chrono::milliseconds window{0};  // the longest expiry recorded on the node
  // A cluster member's answer: sha1 of the identity of the server that ran
  // the script (server_mark.hpp); '' in a standalone member's answer.
  std::string_view server_mark;
};

// nullopt unless the answer is an array of 6 elements whose window (absent
// reads as 0) is in 0..max_expiry. The mark is "<server ms> <random>
// <identity>" (record_read_script).
std::optional<node_record> read_node_record(const reply& r);

}  // namespace redsync::detail
