// Why an acquisition did not succeed, read from the per-node detail of its
// redsync::result: the words the tool prints (naming the nodes and their
// reasons), whether waiting longer can still help, and the exit status when
// the tool gives up. Pure: no I/O.
#pragma once

#include <redsync/error.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace redsync::cli {

struct acquire_verdict {
  /// The exit status if the tool gives up now: not_acquired (another holder
  /// has it), unavailable (nodes unreachable, not voting yet, slow or
  /// loading), refused (authentication or permission) or node_errors (error
  /// replies that retrying cannot fix).
  int status = 0;
  /// True when nodes that refuse or answer every attempt with an error that
  /// retrying cannot fix are more than a quorum can do without: no quorum is
  /// possible until someone fixes them.
  bool hopeless = false;
  /// What stands in the way, e.g. `held by another holder on 3/3 nodes` or
  /// `2/3 nodes unreachable: 127.0.0.1:7001, 127.0.0.1:7002 (connect:
  /// connection refused)`; several reasons are joined with "; ".
  std::string why;
};

/// What was acquired: the mutex's words and quorum, or a semaphore's.
struct acquired_thing {
  /// The quorum; 0 = a majority of the nodes (a mutex's).
  std::size_t quorum = 0;
  /// Says a node refused because others hold it.
  std::string_view held_as = "held by another holder";
};

/// Judges a failed lock or try_lock (or a permit's acquisition, with
/// `what`). `r.nodes` holds every node of the Redsync, in order (empty when
/// no attempt was answered, e.g. --wait ran out during the first one).
acquire_verdict judge_acquisition(const result& r, const acquired_thing& what = {});

/// The nodes of a granted acquisition that never vote until the node list
/// changes (one server listed twice, a Redis Cluster node listed as
/// redis://), with their reasons: `1/3 nodes never vote: 127.0.0.1:7002
/// (node 3 (redis://127.0.0.1:7002) is a Redis Cluster node ...)`; empty
/// when there are none. The lock holds without them, but with less fault
/// tolerance than the node list seems to give.
std::string never_voting(const result& r);

}  // namespace redsync::cli
