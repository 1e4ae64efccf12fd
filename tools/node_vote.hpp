// Whether a node's "yes" counts towards a quorum right now, as a client with
// the restart guard on (the default) would judge it, from what `status` and
// `ping` read on the node: INFO, the redsync record and the server's clock.
// The rules are the library's (lib/redlock/trust/node_trust.hpp), read without
// changing anything: a node that cannot be identified, is a replica or may
// evict keys never votes; one whose record does not name its current server
// run (brand-new, restarted, replaced, flushed) votes only once a client has
// repaired the record, about one guard window after first meeting it; one
// repaired less than the guard window ago is held back by the restart guard.
// Pure.
#pragma once

#include "node_probe.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace redsync::cli {

/// The commands whose replies vote_of() reads, in this order. `record`: the
/// node record (a cluster member keeps one per slot, redsync:node:{T}).
std::vector<std::vector<std::string>> vote_commands(const std::string& record = "redsync:node");

struct node_vote {
  enum class state {
    votes,    ///< its yes counts
    not_yet,  ///< unverified or held back by the restart guard; it will vote
    never,    ///< cannot be trusted at all: INFO refused, no run_id, replica, evicting
    unknown,  ///< its record could not be read
  };
  state what = state::unknown;
  /// Why it does not vote, for people; empty when it votes.
  std::string reason{};
  /// Restart guard: how long until it votes again.
  std::optional<std::chrono::milliseconds> votes_in{};
};

/// Judges one node from its replies to vote_commands(), in order, as a
/// client whose own guard window is `ttl` (its expiry) would: the window
/// is the longer of that and the longest expiry recorded on the node.
node_vote vote_of(const probe_reply& info, const probe_reply& record, const probe_reply& time,
                  std::chrono::milliseconds ttl);

/// One server under two names (127.0.0.1 and localhost, a host name and
/// its address): per node, why it never votes when its INFO gives the
/// run_id of an earlier node's (the library counts the server once, under
/// its first name; lib/redlock/trust/node_trust.hpp), else empty. `infos[i]` is
/// node i's INFO reply, or null when it was not read; `uris` the node list.
std::vector<std::string> same_servers(const std::vector<std::string>& uris,
                                      const std::vector<const probe_reply*>& infos);

/// A Redis Cluster node listed as a standalone node (redis://, rediss://):
/// per node, why it never votes when its INFO says cluster_enabled:1 (the
/// library refuses its vote, naming the redis+cluster:// URI to list
/// instead; lib/redlock/trust/node_identity.hpp), else empty. `infos` and `uris`
/// as for same_servers; the INFO of cluster members (redis+cluster://) must
/// be null.
std::vector<std::string> cluster_nodes(const std::vector<std::string>& uris,
                                       const std::vector<const probe_reply*>& infos);

/// "votes", "not_yet", "never", "unknown".
const char* to_string(node_vote::state s);

/// What a node line of `status` and `ping` adds: empty when the node votes,
/// else e.g. "; does not vote yet: restart guard: ...".
std::string vote_suffix(const node_vote& v);

}  // namespace redsync::cli
