// One call per slot group on a cluster member, and the member's answer.

#include "redlock/mutex/slot_groups.hpp"

#include <memory>

namespace redsync::detail {

bool sent_per_group(member_slot pool, const script_call& call) noexcept {
  return pool.is_cluster() && call.cluster_groups.size() > 1;
}

void send_to_member(member_slot pool, const script_call& call, const std::vector<std::uint16_t>& slots,
                    const form_sender& send, const group_combiner& combine, command_callback done) {
  if (!sent_per_group(pool, call)) return send(pool, call, std::move(done));
  struct gathering {
    std::vector<command_result> answers;
    std::size_t left = 0;
    group_combiner combine;
    command_callback done;
  };
  auto g = std::make_shared<gathering>();
  g->answers.resize(call.cluster_groups.size());
  g->left = call.cluster_groups.size();
  g->combine = combine;
  g->done = std::move(done);
  for (std::size_t i = 0; i < call.cluster_groups.size(); ++i) {
    send(member_slot{pool.m, slots[i]}, call.for_group(i), [g, i](command_result&& r) {
      g->answers[i] = std::move(r);
      if (--g->left > 0) return;
      auto d = std::move(g->done);
      d(g->combine(std::move(g->answers)));
    });
  }
}

long long first_integer(const reply& r) noexcept {
  if (r.type == reply::kind::integer) return r.integer;
  if (r.type == reply::kind::array && !r.elements.empty() && r.elements[0].type == reply::kind::integer)
    return r.elements[0].integer;
  return 0;
}

command_result combine_answers(std::vector<command_result>&& groups, node_status (*classify)(const reply&)) {
  std::size_t failed = groups.size(), taken = groups.size(), missing = groups.size(), best = groups.size();
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const command_result& r = groups[i];
    const node_status s =
        r.status != transport_status::ok || r.value.is_error() ? node_status::reply_error : classify(r.value);
    if (s == node_status::ok) {
      if (best == groups.size() || first_integer(r.value) > first_integer(groups[best].value)) best = i;
    } else if (s == node_status::taken) {
      if (taken == groups.size()) taken = i;
    } else if (s == node_status::missing) {
      if (missing == groups.size()) missing = i;
    } else if (failed == groups.size()) {
      failed = i;
    }
  }
  for (const std::size_t pick : {failed, taken, missing, best})
    if (pick < groups.size()) return std::move(groups[pick]);
  return {};
}

}  // namespace redsync::detail
