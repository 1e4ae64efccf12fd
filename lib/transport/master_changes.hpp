#pragma once

// The failovers a cluster member's slot maps show, for observability
// (cluster_router reports them; docs/observability.md). Pure: no I/O.
//
// A failover: a slot is served by a master that was no master in the map
// read before, where it was last served by one that is no master any more
// (a replica promoted in place of a dead or demoted master). A migration
// moves slots between masters that were masters already. "Last served"
// looks through maps where the slot had no master at all: after a master
// dies its slots are unserved until its replica is promoted, and a map read
// in between must not hide the failover.

#include "transport/slot_map.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace redsync::detail {

class master_changes {
 public:
  master_changes() { last_.fill(-1); }
  // Takes the map just read; returns (old master, new master) host:port for
  // each failover it shows (none for the first map).
  std::vector<std::pair<std::string, std::string>> adopt(const slot_map& m);
  // The masters (host:port) that serve slots in the last map taken.
  const std::vector<std::string>& masters() const noexcept { return masters_; }
  // The masters it still knows: those some slot was last served by (the
  // current ones, and the last of slots nobody serves now). Masters that
  // left long ago are forgotten.
  std::size_t known() const noexcept { return names_.size(); }

 private:
  // Drops the names no slot refers to any more (every adopt).
  void forget_unused_names();

  std::vector<std::string> names_;          // every master some slot was last served by
  std::array<std::int32_t, 16384> last_{};  // per slot: index into names_, or -1
  std::vector<std::string> masters_;
};

}  // namespace redsync::detail
