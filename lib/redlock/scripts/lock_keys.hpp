#pragma once

// The keys of one lock (one name, or the sorted names of a multi-name lock)
// on one kind of member: a standalone member's (scripts.hpp, unchanged) or
// a cluster member's (cluster_keys.hpp: every name wrapped in its hash tag,
// the node record of the names' slot). A set with both kinds encodes each
// call once per kind (script_call::cluster_evalsha), and once per slot group
// for a cluster member when the names span several slots
// (script_call::cluster_groups).

#include "redlock/scripts/lock_scripts.hpp"
#include "redlock/scripts/script_call.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

struct lock_keys {
  // cluster: the layout of a cluster member, for names that all share one
  // slot (one group of group_by_slot). `kind`: a reader's keys (one name)
  // add the readers' set (lock_scripts.hpp).
  lock_keys(const std::vector<std::string>& names, bool cluster, hold_kind kind = hold_kind::exclusive);
  // The views below point into this object: it does not move.
  lock_keys(const lock_keys&) = delete;
  lock_keys& operator=(const lock_keys&) = delete;

  const std::vector<std::string> names;         // the lock keys, in the order of the names
  const std::vector<std::string> line_keys;     // per name: its waiting line
  const std::vector<std::string> lease_keys;    // per name: the leases of its line
  const std::vector<std::string> channels;      // per name: where its releases are announced
  const std::vector<std::string> readers_keys;  // a reader's: its name's readers' set; else empty
  const std::string record;                     // the node record the acquisition increments
  const std::string server_mark;                // cluster only: the slot's server mark (server_mark.hpp)
  // Script KEYS: lock = names; acquire = names, record, lines, leases
  // (and the server mark on a cluster member);
  // release = names, lines, leases; fence = first name, record. A reader's
  // add the readers' set after the others (before the server mark), and its
  // fence names the set instead of the name.
  const std::vector<std::string_view> keys;
  const std::vector<std::string_view> acquire_keys;
  const std::vector<std::string_view> release_keys;
  const std::vector<std::string_view> fence_keys;
};

// A lock's keys on a cluster member: one lock_keys per slot group, in
// ascending slot order (group_by_slot), with the groups' slots.
struct cluster_layout {
  std::vector<std::uint16_t> slots;
  std::vector<std::unique_ptr<const lock_keys>> groups;
};
cluster_layout make_cluster_layout(const std::vector<std::string>& names,
                                   hold_kind kind = hold_kind::exclusive);

using lock_keys_of = const std::vector<std::string_view> lock_keys::*;

// `s` called with `plain`'s keys (picked by `which`) and `args`, then each
// layout's channels when `channels`; with a cluster form from `groups`
// when there is one group, and one per group when there are several (none
// without cluster members).
script_call make_lock_call(const lua_script& s, const lock_keys& plain,
                           const std::vector<std::unique_ptr<const lock_keys>>& groups, lock_keys_of which,
                           const std::vector<std::string_view>& args, bool channels);

}  // namespace redsync::detail
