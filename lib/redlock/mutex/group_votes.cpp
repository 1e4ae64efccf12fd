// A cluster member's vote when it answers per slot group.

#include "redlock/mutex/group_votes.hpp"

#include "redlock/mutex/slot_groups.hpp"
#include "redlock/scripts/script_answers.hpp"

#include <algorithm>

namespace redsync::detail {

void group_votes::clear() {
  for (auto& g : groups_) g.clear();
}

command_result group_votes::combine(std::size_t i, std::vector<command_result>&& groups) {
  const bool all_won = std::all_of(groups.begin(), groups.end(), [](const command_result& r) {
    return r.status == transport_status::ok && !r.value.is_error() &&
           classify_acquire(r.value) == node_status::ok;
  });
  // The groups' answers reach us before the round checks the engine: after
  // shutdown they still come (a frozen master's, or their failure when the
  // drained connections are closed), when the engine has handed its pools
  // over (can_send() is false, at() must not be called) or, destroyed on
  // its own loop thread, is gone. Nothing need be sent then: the abandon
  // at shutdown sent the release to every group of a round in flight, and
  // a round that reported earlier undid the members it did not await.
  if (!all_won && !eng_alive_.expired() && st_.eng.can_send()) {
    // All or nothing: only a group whose key holds another value ("taken")
    // surely did not apply our SET.
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const command_result& r = groups[g];
      if (r.status == transport_status::ok && !r.value.is_error() &&
          classify_acquire(r.value) == node_status::taken)
        continue;
      send_script_in_order(st_.eng.script_mode(), st_.eng.at(i, st_.slots[g]), st_.route,
                           st_.undo().for_group(g), st_.timeout, [](command_result&&) {});
    }
  }
  groups_[i] = groups;
  return combine_answers(std::move(groups), classify_acquire);
}

bool group_votes::exclude_yes(std::size_t i, const reply& r, std::string_view served_by,
                              std::chrono::milliseconds expiry, const std::vector<node_result>& so_far,
                              std::string& why) {
  const auto& groups = groups_[i];
  if (groups.empty()) return st_.eng.trust(st_.slot).exclude_yes(i, r, served_by, expiry, so_far, why);
  // Every group's record is judged (each (member, slot) notes its vote);
  // the first reason is kept.
  bool excluded = false;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::string group_why;
    if (!st_.eng.trust(st_.slots[g])
             .exclude_yes(i, groups[g].value, groups[g].served_by, expiry, so_far, group_why))
      continue;
    if (!excluded) why = std::move(group_why);
    excluded = true;
  }
  return excluded;
}

void group_votes::note_floors(const tally& t, token_votes& votes) const {
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    if (groups_[i].empty() || t.nodes[i].status != node_status::ok || !votes.at_or_out[i]) continue;
    const bool all_at_token = std::all_of(groups_[i].begin(), groups_[i].end(), [&](const command_result& r) {
      return first_integer(r.value) >= votes.token;
    });
    if (all_at_token) continue;
    votes.at_or_out[i] = false;
    --votes.at_token;
  }
}

}  // namespace redsync::detail
