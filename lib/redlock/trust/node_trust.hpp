#pragma once

// Whether a node's "yes" to an acquisition may count: the restart guard and
// the fencing counter's repair, from what each node's record says.
//
// Each node keeps one record (scripts.hpp: `record_key`) holding its fencing
// counter, the server identity the record was last verified for
// (node_identity.hpp), since when (`since`, server clock), and the
// longest expiry any client has used on it (`window`). A node whose record
// does not name its current identity (it restarted, was replaced by another
// server, was resynchronised from another server, lost its data, or never
// served a lock) may have lost lock keys and counter increments. Its vote
// does not count until (1) its counter has been repaired and the record
// stamped for the current identity, and (2) with the restart guard on, the
// guard window (the longest of this client's window and the recorded one)
// has passed since it was first seen so, so every lock key it may have lost
// has expired. The record lives on the node, so every client (including one
// that never saw the node before) sees the same time and window.
//
// The repair of a node x, in three steps, each of which any client may
// take (the repair's progress lives on x, so clients that live shorter than
// the repair delay D complete it together):
// (1) a look finds x unverified and no mark for x's current identity, and
//     sets one: a random value naming that identity and carrying x's server
//     time t1 (record_read_script). A flush wipes the mark; a mark naming
//     another identity (x restarted with its data, or was resynchronised or
//     reloaded), or from x's future (its clock moved back), does not count
//     and is replaced.
// (2) a later look reads every node, and reads x still unverified under the
//     identity the mark names, with the same mark, at x's server time t2 with
//     t2 - t1 >= D + d, where d is how long that look took on the client's
//     steady clock (from sending its first read to its last answer). D is
//     the repair delay: at least the longest expiry any client uses (the
//     guard window and the windows recorded on the nodes), except on a
//     brand-new cluster, where no node has a counter yet: there D = 0, and
//     (2) only has to be a look after the one that set the mark.
// (3) x is raised to the maximum M of the counters read in (2) and stamped
//     (identity, since = t1), by a script that applies only while x still
//     carries that mark, and removes it. Step (3) is allowed only when in (2)
//     either at least a quorum of nodes other than x answered with a verified
//     record, or every node answered.
//
// Clock assumption: x's clock does not run ahead of real time between t1
// and t2 (no forward step; a drift within drift_factor is covered as for
// the lock keys), and the client's steady clock does not run slow during the
// look. Then x's read in (2) came at least D + d after the read of (1) in
// real time, and every other read of (2) at most d before x's: every read of
// (2) came at least D after (1). A forward step of x's clock by S in that
// time shortens the wait by up to S; a backward step only lengthens it (a
// mark from x's future is replaced).
//
// Claim: once a token T was granted, every later grant of any name yields a
// token > T, as long as the nodes that lost data since the acquisition of T
// began are a minority, no client uses an expiry longer than the repair
// delay, and the clock assumption holds. Proof. T was granted once a quorum
// Q1 of nodes whose votes counted held a counter >= T: they answered T, or
// the write-back raised them to T (fencing.hpp). Every write of that
// acquisition ran before its start + expiry, or the grant was refused for
// lack of validity. Let L be the nodes that lost data since that start:
// |L| < |Q1|, so Q1 \ L is not empty, and its nodes hold a counter >= T from
// the grant on. A later grant wins on a quorum Q2 of verified nodes, which
// meets Q1 in some node x. If x lost nothing since, its counter is >= T and
// its increment gives > T. Otherwise x was repaired after its last loss: a
// loss wipes the mark or changes the identity, and a mark counts only under
// the identity it names, so that loss came before (1) set the mark, and (1)
// came after the acquisition of T began (the loss did); the reads of (2), a
// repair delay after (1), came after every write of that acquisition. In case
// "every node answered", those reads include Q1 \ L, so M >= T. In case "a
// quorum of verified nodes other than x", those nodes meet Q1 \ {x}; each
// such node lost nothing since (counter >= T) or was itself repaired since,
// which by induction on the order of repairs left it >= T; so M >= T. Either
// way x's increment gives > T. A brand-new cluster (no counter anywhere) has
// granted nothing, so it needs no delay. A multi-name lock takes its token
// from the same counter, so this holds for each of its names.
//
// Never used. A record that no node has a counter in, at a look that every
// node answered (a brand-new set, or on a cluster member a slot no lock has
// used), is stamped as verified since the node's time 0: no repair delay
// and no guard window. Why no lock key can be lost there: a grant that may
// still be held incremented the record, in the same atomic step as its
// keys, on a quorum of nodes; the nodes that lost data since are a
// minority, so one of that quorum still has a counter, and the look would
// have read it. A key written after the look's read of its node can only
// be lost by a loss after the read, which changes the node's identity
// (restart, resynchronisation, reload: the stamp no longer matches) or
// wipes the record (a flush: the stamp is gone): either makes the node
// unverified, and the rules above apply from then on. So a name of a slot
// never used votes after one or two looks, not after a guard window
// (issue 32, item 4).
//
// The restart guard measures the node's age as its server time minus
// `since`, so every client agrees on it. A `since` in the node's future (its
// clock was stepped back) is moved to the node's present by the next look
// (record_read_script), which restarts the window from then: the node is
// kept out about a window after the step was seen, not the step's size.
//
// A node that cannot be identified (INFO refused by the ACL, no run_id as on
// Dragonfly), that is a replica, or whose maxmemory policy may evict keys,
// never votes: fail closed, with the reason in the node's result.
//
// One server under two names (127.0.0.1 and localhost, a host name and its
// address; the engine rejects the same address twice) must not vote twice:
// a quorum counting it twice would rest on fewer independent servers than
// Redlock assumes, and a single crash could undo it. Two nodes whose
// connections read the same run_id (per server process; not master_replid,
// which replicas share) are one server. A yes from node i does not count
// when (a) a node j < i now has i's run_id: the first name votes, the
// later ones never do; or (b) a node j > i already counted a yes in the
// same round under i's run_id: j learned the run_id before i's connection
// told it, and a yes of the server already counted. Each yes is judged
// after its own connection read INFO, so of two yeses from one server run in
// one round, the later one sees the earlier one's run_id, through (a) if
// the earlier came from a lower node, else through (b). (b) compares
// with the run_id of j's last counted yes, which is this round's unless j
// reconnected to another server run since and that run's yes already
// counted elsewhere, which the repair delay after a restart rules out
// within one round.
//
// Loop thread only.

#include "redlock/trust/node_identity.hpp"
#include "transport/loop_timer.hpp"
#include "transport/reply.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

class trust_host;

class node_trust {
 public:
  using clock = std::chrono::steady_clock;

  // guard: the restart guard is on. window: the guard window when not zero;
  // zero means the longest expiry this Redsync's mutexes use.
  // slot: the slot whose names this trust judges, with cluster members
  // (each cluster member's record is then redsync:node:{T} of that slot,
  // and its identity the INFO of the master that answered each call:
  // docs/cluster.md); a standalone member's record is its one record.
  node_trust(trust_host& eng, bool guard, std::chrono::milliseconds window, std::uint16_t slot = 0);
  node_trust(const node_trust&) = delete;
  node_trust& operator=(const node_trust&) = delete;

  // The reply to `INFO` on a new connection to node i (an error reply when
  // it was refused).
  void on_server_info(std::size_t i, const reply& info);
  // Node i's identity as `other` knows it (a new slot's trust).
  void copy_identity(std::size_t i, const node_trust& other);

  // Node i said yes to an acquisition with expiry `expiry` with `r` =
  // {token, record identity, ms since first verified, recorded window ms}.
  // True (with the reason) when that vote must not count; a node found
  // unverified is repaired in the background. A recorded window below the
  // expiry (possible only from the transaction of fast_acquire.hpp, which
  // cannot raise it) does not count either.
  // `round`: every node's result in this round so far (`ok`: its yes
  // counted), which the check for one server under two names needs.
  // `served_by`: the master of a cluster member that answered
  // (command_result::served_by).
  bool exclude_yes(std::size_t i, const reply& r, std::string_view served_by,
                   std::chrono::milliseconds expiry, const std::vector<node_result>& round, std::string& why);

  // Per node, why it is left out of every round as the same server as an
  // earlier node of the list (the message names both), else empty; empty
  // when no node is. Asking it keeps the later names from taking the
  // server's keys first, which would turn the first name's yes into "taken".
  std::vector<std::string> later_names() const;

  // Node i's last counted vote showed a recorded window of at least
  // `expiry`, and it never refused the transaction: the transaction may
  // acquire there (fast_acquire.hpp).
  bool window_covers(std::size_t i, std::chrono::milliseconds expiry) const;
  // Node i answered the transaction with an error (MULTI or EXEC refused by
  // the ACL or renamed away, a record of the wrong type, ...): from now on
  // this Redsync acquires there with the script only.
  void transaction_refused(std::size_t i);

  // Runs `ready` once every node's record has been looked at (and repaired
  // where that needs no delay) since this Redsync started: on the first call
  // this waits for one or two looks (bounded by `timeout` per command),
  // later at once.
  void when_surveyed(std::chrono::microseconds timeout, std::function<void()> ready);
  // Whether when_surveyed would run `ready` at once.
  bool surveyed() const noexcept { return surveyed_; }

  // Looks at every node's record now (a member's slot changed master: the
  // look marks the promoted master, so its window starts from here).
  void look_now() { start_look(); }

  // The guard window this client brings (zero when the guard is off).
  std::chrono::milliseconds window() const;

  // Loop thread, at shutdown: stops the repair timer.
  void close();

 private:
  struct node {
    std::string identity;          // from the last handshake (node_identity.hpp); empty if unknown
    std::string identity_mark;     // cluster member: server_mark(identity), '' if unknown
    std::string served_by;         // cluster member: the master that answered last
    std::string run_id;            // from the last handshake; empty if unknown
    std::string voted_run_id;      // the run_id of its last counted yes
    std::string problem;           // why this node cannot be verified at all, if so
    std::string mark;              // the repair's mark read from the node while it was unverified
    std::int64_t first_seen = 0;   // server ms the mark was set (step 1)
    clock::time_point ready_at{};  // when a look may complete the repair (step 2), as this client reckons
    std::string blocked;           // why the last look could not repair it, if so
    std::chrono::milliseconds counted_window{0};  // the recorded window of its last counted vote
    bool no_transaction = false;                  // it answered the transaction with an error
  };
  struct look;

  // exclude_yes without telling telemetry.
  bool judge_yes(std::size_t i, const reply& r, std::chrono::milliseconds expiry,
                 const std::vector<node_result>& round, std::string& why);
  // Cluster member i's yes `r` carries the server mark of the identity this
  // client holds for the master that answered (server_mark.hpp); else false
  // with the reason, and that master's INFO is read again.
  bool answered_by_known_server(std::size_t i, const reply& r, std::string& why);
  // Why node i's yes must not count because another node is the same
  // server, or empty.
  std::string same_server(std::size_t i, const std::vector<node_result>& round) const;
  // Node i is the first node of the list with its run_id (or has none).
  bool first_of_its_server(std::size_t i) const;
  void start_look();
  // A cluster member i answered from master `served_by`: its identity for
  // this slot is that master's (no-op for a standalone member).
  void adopt_master(std::size_t i, std::string_view served_by);
  // Node i's record key for this trust's slot.
  std::string record_of(std::size_t i) const;
  void on_look(const look& l);
  void settle();
  void schedule(clock::time_point at);
  std::chrono::milliseconds repair_delay(std::chrono::milliseconds recorded) const;

  trust_host& eng_;
  const bool guard_;
  const std::chrono::milliseconds fixed_window_;
  const std::uint16_t slot_;
  std::vector<node> nodes_;
  bool surveyed_ = false;
  bool looking_ = false;
  bool look_again_ = false;
  bool closed_ = false;
  int stamps_in_flight_ = 0;
  std::chrono::microseconds timeout_{1000};
  std::chrono::milliseconds recorded_window_{0};  // the longest window read from any record
  loop_timer* timer_ = nullptr;
  clock::time_point timer_at_ = clock::time_point::max();
  std::vector<std::function<void()>> waiting_;
  // Callbacks of commands still in flight when the engine is destroyed
  // check this first.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace redsync::detail
