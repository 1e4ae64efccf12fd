#pragma once

// A blocking lock()'s place in the fair waiting line, one line per name on
// every node; the line's protocol (states, rules, invariants) is in
// scripts.hpp. The client's side of it, kept here:
//  - the acquire script's per-node call: "join" where we are not known to
//    be in line yet (at our arrival), "stay" where an earlier answer put us
//    there (so a node that evicted us meanwhile puts us at the back, and
//    then our arrival moves back on every node: rule A);
//  - how long to wait before the next attempt: the head of the line polls
//    at the retry delay (at most every `head_refresh`); a waiter behind it
//    cannot win, so it waits for a wake-up and refreshes its place at most
//    every second and at least every 100 ms;
//  - the lease each attempt takes, which covers that wait;
//  - wake-ups: a release publishes the head on each node it reserves the
//    name on; we try again at once when a quorum of nodes is open to us;
//  - leaving: where we may be in line, once the acquisition is confirmed or
//    given up (rule L: never before).
// try_lock never waits in line: its calls ask for nothing ("0").
// Loop thread only.

#include "redlock/engine/round.hpp"
#include "redlock/mutex/mutex_state.hpp"
#include "redlock/wakeup/release_listener.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

class waiting_line {
 public:
  // `waits`: false for try_lock, which only looks.
  waiting_line(mutex_state& st, std::string_view value, bool waits);

  // Encodes the next attempt's calls; `until_try` is how long until the
  // next counted try is due (the retry delay); `final_try`: no attempt
  // follows, so this one does not join the line. Returns the wait after
  // this attempt that its lease covers (wait_after() never exceeds it).
  std::chrono::milliseconds prepare_attempt(std::chrono::milliseconds until_try, bool final_try);
  // The acquire call for node i in this attempt (encoded on first use).
  const script_call& call_for(std::size_t i);
  // The attempt's script went to node i: if it asks to join, node i may
  // have us in line now (a node sent only the transaction never does:
  // fast_acquire.hpp).
  void on_script_sent(std::size_t i);
  // The attempt was sent (before any on_script_sent of it).
  void on_attempt_sent();
  // Node i said yes; `in_line`: the answer's in-line flag.
  void on_won(std::size_t i, bool in_line);
  // What the attempt's answers say about our place, and whether it reached
  // a quorum of nodes at all: a waiter cut off from the majority leaves.
  void on_attempt_answered(const tally& t);
  // Whether the prepared attempt must await every node (not fail_fast):
  // the last one's fail_fast report left open whether we reach a quorum.
  bool awaits_every_node() const noexcept { return awaits_every_node_; }
  // How long to wait after a failed attempt, `until_try` before the next
  // counted try is due: never longer than the prepared wait.
  std::chrono::milliseconds wait_after(std::chrono::milliseconds until_try) const;

  // A release on node i named us. True when a quorum of nodes is open to
  // us now (they named us since the last attempt, or the last attempt won
  // there and gave the name back to us): time to try.
  bool on_release(std::size_t i);
  // Same test without a new wake-up (after an attempt failed).
  bool quorum_open() const;

  // Starts hearing releases of our names (once; not while shutting down).
  // True if a name's subscription was already active (release_listener::
  // watch): releases during the attempt just made were not heard.
  bool listen(release_listener::waiter* w);
  // Stops hearing them.
  void stop_listening(release_listener::waiter* w);
  // Leaves the line on every node we may be in. Not awaited. Sent after an
  // acquisition is confirmed (the confirmed holder's keys are left alone)
  // or given up.
  void leave();

 private:
  enum class place : unsigned char { out, maybe, in };

  std::string fresh_arrival() const;
  // A leave's script fallback (after NOSCRIPT) goes out only while no later
  // attempt of this acquisition joined the line: it would run after that
  // join and take us out of the line again.
  fallback_wanted before_next_attempt() const;

  mutex_state& st_;
  const std::string_view value_;
  const bool waits_;
  std::string arrival_;  // our rank: the same number on every node
  std::string next_arrival_;
  std::vector<place> places_;  // per node
  std::vector<bool> open_;     // per node: named us, or gave the name back to us
  std::string lease_ms_;       // this attempt's lease
  script_call join_call_;      // "1" (or "0": not waiting); empty until needed
  script_call stay_call_;      // "2", where we are in line; empty until needed
  std::chrono::milliseconds planned_wait_{0};
  bool reaches_quorum_ = true;      // the last attempt reached a quorum of nodes
  bool reach_open_ = false;         // its fail_fast report did not await enough nodes to tell
  bool awaits_every_node_ = false;  // the prepared attempt is not fail_fast (reach_open_)
  bool joins_ = false;              // the prepared attempt joins (or stays in) the line
  bool first_ = true;               // the last answers made us the head somewhere (assumed at first)
  bool listening_ = false;
  std::vector<std::string> my_channels_;  // per name, while listening
  std::shared_ptr<std::uint64_t> joins_sent_ = std::make_shared<std::uint64_t>(0);
};

}  // namespace redsync::detail
