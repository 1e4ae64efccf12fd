#pragma once

// An acquisition's votes from cluster members that answer per slot group
// (a multi-name lock whose names span several slots; slot_groups.hpp). For
// each such member, within one attempt:
//  - all-or-nothing: its vote is yes only if every group won; where some
//    group did not, the groups that won (and those that failed, whose SET
//    may have run) are undone at once, in order on their connection, with
//    the undo of rule U (scripts.hpp), so the member keeps none of them;
//  - its vote is its largest group counter (the token rule of
//    cluster_keys.hpp), and it counts only if every (member, slot) record
//    is trusted (node_trust, per slot);
//  - it needs the write-back unless every group's counter is at the token.
// Standalone members, and locks whose names share one slot, answer once and
// are judged as before. Loop thread only.

#include "redlock/engine/round.hpp"
#include "redlock/mutex/fencing.hpp"
#include "redlock/mutex/mutex_state.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

class group_votes {
 public:
  explicit group_votes(mutex_state& st) : st_(st), eng_alive_(st.eng.alive()), groups_(st.eng.size()) {}

  // A new attempt: the answers of the last one are forgotten.
  void clear();
  // Member i's answer to the acquire script from its groups' answers (kept
  // for judge and note_floors); undoes its groups when it votes no.
  command_result combine(std::size_t i, std::vector<command_result>&& groups);
  // node_trust::exclude_yes for member i's yes: per group's slot for a
  // member that answered per group (true if any record is not trusted),
  // else for the lock's first slot.
  bool exclude_yes(std::size_t i, const reply& r, std::string_view served_by,
                   std::chrono::milliseconds expiry, const std::vector<node_result>& so_far,
                   std::string& why);
  // Members that won per group with some group below the token are not
  // "at the token": the write-back raises every group's record.
  void note_floors(const tally& t, token_votes& votes) const;

 private:
  mutex_state& st_;
  const std::weak_ptr<int> eng_alive_;               // expires with the engine (see combine)
  std::vector<std::vector<command_result>> groups_;  // per member: its groups' answers in this attempt
};

}  // namespace redsync::detail
