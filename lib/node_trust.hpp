#pragma once

// Whether a node's "yes" to an acquisition may count: the restart guard and
// the fencing counter's repair, from what each node's record says.
//
// Each node keeps one record (scripts.hpp: `record_key`) holding its fencing
// counter, the server run_id the record was last verified for, and when
// (`since`, server clock). A node whose record does not name its current
// run_id (it restarted, was replaced by another server, lost its data, or
// never served a lock) may have lost lock keys and counter increments. Its
// vote does not count until (1) its counter has been repaired and the record
// stamped for the current run, and (2) with the restart guard on, `window`
// has passed since that stamp, so every lock key it may have lost has
// expired. The stamp lives on the node, so every client (including one that
// never saw the node before) sees the same time.
//
// The repair of a node x, in three steps: (1) a look reads every node's
// record, and the mark in x's record (a random value set by the first look
// that found none; a flush wipes it); (2) once that look is complete, a
// second look reads every node again; (3) x, if unverified in both looks
// under the same run_id and with the same mark, is raised to the maximum M
// of the counters read in (2) and stamped, by a script that applies only
// while x still carries that mark. Step (3) is allowed only when in (2)
// either at least a quorum of nodes other than x answered with a verified
// record, or every node answered.
//
// Claim: once a token T was granted, every later grant of any name yields a
// token > T, as long as the nodes that lost data since T was granted are a
// minority. Proof. T was granted when a quorum Q1 of verified nodes held a
// counter >= T (mutex_ops.cpp; only verified nodes vote). Let L be the nodes
// that lost data since then: |L| < |Q1|, so Q1 \ L is not empty, and its
// nodes kept a counter >= T. A later grant wins on a quorum Q2 of verified
// nodes, which meets Q1 in some node x. If x lost nothing since T, its
// counter is >= T and its increment gives > T. Otherwise x lost data after
// T and was repaired since. A loss wipes the mark or changes the run_id, so
// x's last loss came before (1) read it, and the reads of (2), issued after
// (1) completed, came after T was granted. In case "every node answered",
// those reads include Q1 \ L, so M >= T. In case "a quorum of verified nodes
// other than x", those nodes meet Q1; each such node lost nothing since T,
// or was itself repaired since, which by induction on the order of repairs
// left it >= T; so M >= T. Either way x's increment gives > T. A multi-name
// lock takes its token from the same counter, so this holds for each of its
// names.
//
// A node whose INFO cannot be read (an ACL without +info) or has no run_id
// (servers such as Dragonfly) cannot be verified and never votes: fail
// closed, with the reason in the node's result.
//
// Loop thread only (except note_expiry).

#include "reply.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

class engine;

class node_trust {
 public:
  // guard: the restart guard is on. window: the guard window when not zero;
  // zero means the longest expiry this Redsync's mutexes use.
  node_trust(engine& eng, bool guard, std::chrono::milliseconds window);
  node_trust(const node_trust&) = delete;
  node_trust& operator=(const node_trust&) = delete;

  // The reply to `INFO server` on a new connection to node i (an error reply
  // when it was refused).
  void on_server_info(std::size_t i, const reply& info);

  // Node i said yes to an acquisition with `r` = {token, record run, ms since
  // stamped}. True (with the reason) when that vote must not count; a node
  // found unverified is repaired in the background.
  bool exclude_yes(std::size_t i, const reply& r, std::string& why);

  // Runs `ready` once every node's record has been looked at (and repaired
  // where possible) since this Redsync started: on the first call this
  // waits for one look (bounded by `timeout` per command), later at once.
  void when_surveyed(std::chrono::microseconds timeout, std::function<void()> ready);

  // The guard window now in force (zero when the guard is off).
  std::chrono::milliseconds window() const;

 private:
  struct node {
    std::string run_id;    // from the last handshake's INFO; empty if unknown
    std::string problem;   // why this node cannot be verified at all, if so
    std::string mark;      // our mark on the node, left while it was unverified
    std::string mark_run;  // its run_id then
    std::string blocked;   // why the last look could not repair it, if so
  };
  struct look;

  void start_look();
  void on_look(const look& l);
  void settle();

  engine& eng_;
  const bool guard_;
  const std::chrono::milliseconds fixed_window_;
  std::vector<node> nodes_;
  bool surveyed_ = false;
  bool looking_ = false;
  bool look_again_ = false;
  int stamps_in_flight_ = 0;
  std::chrono::microseconds timeout_{1000};
  std::vector<std::function<void()>> waiting_;
  // Callbacks of commands still in flight when the engine is destroyed
  // check this first.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace redsync::detail
