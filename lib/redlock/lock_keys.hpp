#pragma once

// The keys of one lock (one name, or the sorted names of a multi-name lock)
// on one kind of member: a standalone member's (scripts.hpp, unchanged) or
// a cluster member's (cluster_keys.hpp: every name wrapped in its hash tag,
// the node record of the names' slot). A set with both kinds encodes each
// call once per kind (script_call::cluster_evalsha).

#include "redlock/script_call.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

struct lock_keys {
  // cluster: the layout of a cluster member, for names that all share one
  // slot (the caller checks: see names_slot()).
  lock_keys(const std::vector<std::string>& names, bool cluster);
  // The views below point into this object: it does not move.
  lock_keys(const lock_keys&) = delete;
  lock_keys& operator=(const lock_keys&) = delete;

  const std::vector<std::string> names;       // the lock keys, in the order of the names
  const std::vector<std::string> line_keys;   // per name: its waiting line
  const std::vector<std::string> lease_keys;  // per name: the leases of its line
  const std::vector<std::string> channels;    // per name: where its releases are announced
  const std::string record;                   // the node record the acquisition increments
  // Script KEYS: lock = names; acquire = names, record, lines, leases;
  // release = names, lines, leases; fence = first name, record.
  const std::vector<std::string_view> keys;
  const std::vector<std::string_view> acquire_keys;
  const std::vector<std::string_view> release_keys;
  const std::vector<std::string_view> fence_keys;
};

// The one slot of `names` on a cluster member; throws config_error when
// they span several (a multi-name lock over cluster members needs names
// that share a hash tag until multi-slot locks are built, docs/cluster.md).
std::uint16_t names_slot(const std::vector<std::string>& names);

using lock_keys_of = const std::vector<std::string_view> lock_keys::*;

// `s` called with `plain`'s keys (picked by `which`) and `args`, then each
// layout's channels when `channels`; with a cluster form from `clustered`
// when it is not null.
script_call make_lock_call(const lua_script& s, const lock_keys& plain, const lock_keys* clustered,
                           lock_keys_of which, const std::vector<std::string_view>& args, bool channels);

}  // namespace redsync::detail
