#pragma once

// The fair waiting line a blocking lock() keeps between its attempts, one per
// name on every node (scripts.hpp: acquire_script): a waiter joins with its
// arrival time and a lease, the head of the line is the only one a free lock
// goes to for a short claim window, and a release announces the head so it
// tries at once (release_listener.hpp). try_lock never waits in line.
// Loop thread only.

#include "redlock/mutex_state.hpp"
#include "redlock/release_listener.hpp"
#include "redlock/round.hpp"

#include <chrono>
#include <string>
#include <string_view>

namespace redsync::detail {

class waiting_line {
 public:
  // `waits`: false for try_lock, which only looks.
  waiting_line(mutex_state& st, std::string_view value, bool waits);

  // The acquire script's line arguments for the next attempt, whose retry
  // delay will be `next_delay`. The views point into this object.
  struct script_args {
    std::string_view arrival;  // µs since the epoch: our rank
    std::string lease_ms;
    std::string_view wait;  // "1" to wait in line, else "0"
    std::string_view claim_ms;
  };
  script_args args_for_attempt(std::chrono::milliseconds next_delay) const;
  // The attempt was sent: if it asked to wait, we may be in the lines now.
  void on_attempt_sent();
  // What the attempt's answers say about our place, and whether it reached a
  // quorum of nodes at all: a waiter cut off from the majority leaves.
  void on_attempt_answered(const tally& t);
  // Some node put us at the head of every line on the last attempt.
  bool first() const noexcept { return first_; }

  // Starts hearing releases of our names (once; not while shutting down).
  void listen(release_listener::waiter* w);
  // Stops hearing them.
  void stop_listening(release_listener::waiter* w);
  // Leaves the line on every node we may be in, so we do not hold the others
  // up until our lease runs out; `acquired` with the winning round's `last`.
  // Not awaited.
  void leave(bool acquired, const tally& last);

 private:
  mutex_state& st_;
  const std::string_view value_;
  const bool waits_;
  const std::string arrival_;        // our rank, kept across attempts
  const std::string_view claim_ms_;  // see the constructor
  bool reaches_quorum_ = true;       // the last attempt reached a quorum of nodes
  bool joined_ = false;
  bool listening_ = false;
  bool first_ = false;
};

}  // namespace redsync::detail
