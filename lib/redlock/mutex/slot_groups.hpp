#pragma once

// A lock whose names span several slots, on a cluster member: every call
// goes out once per slot group (the script runs on one slot at a time), and
// the member's answer is made of its groups' answers, so that the member
// acts as one node: it holds the lock only if it holds every group
// (docs/cluster.md, "Multi-name locks"). A standalone member, and a lock
// whose names share one slot, get the one call of script_call.hpp
// unchanged. Loop thread only.

#include "redlock/scripts/script_call.hpp"
#include "transport/reply.hpp"

#include <redsync/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace redsync::detail {

// Sends one form of a call (the whole call, or one group's) to one slot of
// a member.
using form_sender = std::function<void(member_slot pool, const script_call& form, command_callback done)>;

// The member's answer from its groups' answers (in group order).
using group_combiner = std::function<command_result(std::vector<command_result>&& groups)>;

// Whether `call` goes to `pool` as one call per slot group.
bool sent_per_group(member_slot pool, const script_call& call) noexcept;

// Sends `call` to `pool` with `send`: as is unless sent_per_group, else
// group g's form to slot `slots[g]`, all at once; `done` then gets
// `combine` of the groups' answers once all of them are in.
void send_to_member(member_slot pool, const script_call& call, const std::vector<std::uint16_t>& slots,
                    const form_sender& send, const group_combiner& combine, command_callback done);

// The member's answer to a compare-and-act script (classified by
// `classify`: acquire, release, extend, check, fence): the first group that
// failed (no answer, an error, or an answer `classify` does not know), else
// the first that said taken, else the first that said missing; when every
// group said yes, the yes with the largest first integer (for an
// acquisition, the member's vote: its largest counter).
command_result combine_answers(std::vector<command_result>&& groups, node_status (*classify)(const reply&));

// The first integer of an answer (an integer, or an array's first element),
// or 0.
long long first_integer(const reply& r) noexcept;

}  // namespace redsync::detail
