// Rounds and releases of one mutex, from its configuration.

#include "redlock/mutex/mutex_rounds.hpp"

#include "redlock/engine/release_sender.hpp"
#include "redlock/mutex/slot_groups.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "redlock/trust/durable_wait.hpp"

namespace redsync::detail {

round_sender script_sender(const mutex_state& st, const script_call& call, classify_fn classify,
                           fallback_wanted wanted) {
  form_sender send = [mode = st.eng.script_mode(), route = st.route, timeout = st.timeout,
                      wanted = std::move(wanted)](member_slot pool, const script_call& form,
                                                  command_callback cb) {
    send_script(mode, pool, route, form, timeout, std::move(cb), wanted);
  };
  return [call, slots = st.slots, send = std::move(send), classify](std::size_t, member_slot pool,
                                                                    command_callback cb) {
    send_to_member(pool, call, slots, send, member_answer(classify), std::move(cb));
  };
}

round_sender failover_checked_sender(const mutex_state& st, const script_call& call, classify_fn classify,
                                     fallback_wanted wanted) {
  form_sender send = [mode = st.eng.script_mode(), route = st.route, timeout = st.timeout,
                      wanted = std::move(wanted),
                      classify](member_slot pool, const script_call& form, command_callback cb) {
    if (const durable_spec spec = wait_needed(durable_spec{}, pool, timeout))
      return send_script_durable(mode, pool, route, form, timeout, std::move(cb), wanted, spec, classify);
    send_script(mode, pool, route, form, timeout, std::move(cb), wanted);
  };
  return [call, slots = st.slots, send = std::move(send), classify](std::size_t, member_slot pool,
                                                                    command_callback cb) {
    send_to_member(pool, call, slots, send, member_answer(classify), std::move(cb));
  };
}

group_combiner member_answer(classify_fn classify) {
  return [classify](std::vector<command_result>&& groups) {
    return combine_answers(std::move(groups), classify);
  };
}

round_spec mutex_round(const mutex_state& st, const script_call& call, classify_fn classify,
                       fallback_wanted wanted) {
  round_spec spec = mutex_round_without_sender(st, classify);
  spec.send = script_sender(st, call, classify, std::move(wanted));
  return spec;
}

round_spec mutex_round_without_sender(const mutex_state& st, classify_fn classify) {
  round_spec spec;
  spec.classify = classify;
  // An acquisition's refusal may say a name is held as a semaphore
  // (semaphore_scripts.hpp, rule X): counted apart, in the result's words.
  if (classify == classify_acquire) {
    spec.other_kind = acquire_held_as_semaphore;
    spec.other_kind_why = st.held_as_semaphore;
  }
  spec.slot = st.slot;
  spec.quorum = st.eng.quorum();
  spec.fail_fast = st.opts.fail_fast;
  spec.shuffle = st.opts.shuffle_nodes;
  // One server under two names counts once: its later names are left out,
  // so neither an acquisition nor an extension counts it twice, and the
  // first name's SET is not beaten by its own twin (node_trust.hpp).
  // Per slot on a cluster member; left out for one slot is left out.
  for (const std::uint16_t slot : st.slots) {
    auto why = st.eng.trust(slot).later_names();
    if (spec.excluded_why.empty()) spec.excluded_why.resize(why.size());
    for (std::size_t i = 0; i < why.size(); ++i)
      if (spec.excluded_why[i].empty()) spec.excluded_why[i] = std::move(why[i]);
  }
  if (!spec.excluded_why.empty()) {
    spec.excluded.resize(spec.excluded_why.size());
    for (std::size_t i = 0; i < spec.excluded_why.size(); ++i) {
      spec.excluded[i] = !spec.excluded_why[i].empty();
      if (spec.excluded[i]) st.eng.telemetry().vote(i, true, spec.excluded_why[i]);  // said once, on change
    }
  }
  return spec;
}

round_spec release_round(const mutex_state& st) {
  return mutex_round(st, st.release_call, classify_three_way);
}

round_spec undo_round(mutex_state& st) {
  return mutex_round(st, st.undo(), classify_three_way);
}

void send_undo_unawaited(mutex_state& st, std::size_t i) {
  send_to_member(
      st.eng.at(i, st.slot), st.undo(), st.slots,
      [&st](member_slot pool, const script_call& form, command_callback done) {
        send_script_in_order(st.eng.script_mode(), pool, st.route, form, st.timeout, std::move(done));
      },
      member_answer(classify_three_way), [](command_result&&) {});
}

round_sender retried_release_sender(mutex_state& st) {
  form_sender send = [e = &st.eng, route = st.route, timeout = st.timeout,
                      give_up_at = std::chrono::steady_clock::now() + st.opts.expiry + st.drift,
                      // One copy for every node's sends (a std::function per node was a heap copy each).
                      wanted = std::make_shared<const std::function<bool()>>(
                          [s = st.shared_from_this(), gen = st.generation] { return s->generation == gen; })](
                         member_slot pool, const script_call& form, command_callback done) {
    send_release(*e, pool, route, form, timeout, give_up_at, wanted, std::move(done));
  };
  return [call = st.release_call, slots = st.slots, send = std::move(send)](std::size_t, member_slot pool,
                                                                            command_callback done) {
    send_to_member(pool, call, slots, send, member_answer(classify_three_way), std::move(done));
  };
}

void release_everywhere_retried(mutex_state& st) {
  const auto send = retried_release_sender(st);
  for (std::size_t i = 0; i < st.eng.size(); ++i) send(i, st.eng.at(i, st.slot), [](command_result&&) {});
}

}  // namespace redsync::detail
