#pragma once

// A blocking acquire's place in the permits' fair line (one line per
// semaphore on every node; its rule is semaphore_scripts.hpp's rule F, its
// story docs/fair-handover.md, "Permits"). The client's side of it:
//  - one waiter value and one arrival for every attempt of the call, and
//    each attempt's lease (covering the wait until the next one);
//  - which nodes are open to us (they woke us, or the last answer found a
//    permit free for us there), so that we try again once a quorum is;
//  - the undo of a failed attempt, which puts us back in line;
//  - leaving the line where we may still be in it, once the acquisition is
//    confirmed or given up, or while we cannot reach a quorum of nodes.
// try_acquire never queues: its line has no waiter value. Loop thread only.

#include "redlock/engine/tally.hpp"
#include "redlock/scripts/script_call.hpp"
#include "redlock/wakeup/release_listener.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

struct semaphore_state;
struct permit_state;

class permit_line {
 public:
  // `waits`: false for try_acquire, which only looks.
  permit_line(semaphore_state& st, bool waits);

  // Before each attempt: `until_try` is the wait until the next counted
  // try (our lease covers it); `final_try`: no attempt follows, so this one
  // does not join. Forgets which nodes were open to us.
  void prepare_attempt(std::chrono::milliseconds until_try, bool final_try);
  // The acquire script's ARGV after k and expiry: waiter, arrival, lease,
  // "1" (join where refused) or "0". Views into this object.
  std::vector<std::string_view> acquire_args() const;
  // The attempt went out: where it joins, every node may have us in line.
  void on_attempt_sent();
  // Node i is open to us (a grant, a refusal for the slot only, a wake-up).
  void on_open(std::size_t i);
  bool quorum_open() const;
  // The attempt's answers: a waiter that cannot reach a quorum of nodes
  // leaves the line until an attempt does again.
  void on_attempt_answered(const tally& t);
  // The undo of `p`, the current attempt's permit (encoded once per
  // attempt): back in line at our arrival if the attempt joined, else a
  // release.
  const script_call& undo_for(const permit_state& p);

  // Our own channel: a release wakes the waiter it lets in, no other.
  // True if the subscription was already active (release_listener::watch).
  bool listen(release_listener::waiter* w);
  void stop_listening(release_listener::waiter* w);
  // Leaves the line on every node we may be in but those in `won` (where a
  // grant already took us out; null: none), in order after what we sent
  // there before. Not awaited.
  void leave(const std::vector<bool>* won);

 private:
  semaphore_state& st_;
  const std::string waiter_;    // our value in the line ("" when not waiting)
  const std::string arrival_;   // our rank: the same number on every node
  std::string lease_ms_;        // this attempt's lease
  std::string channel_;         // where nodes wake us, while listening
  script_call undo_;            // this attempt's undo, when it joined (encoded on first use)
  std::vector<bool> in_line_;   // per node: we may be in its line
  std::vector<bool> open_;      // per node: a permit is free for us there
  bool joins_ = false;          // this attempt joins the line where refused
  bool reaches_quorum_ = true;  // the last attempt reached a quorum of nodes
};

}  // namespace redsync::detail
