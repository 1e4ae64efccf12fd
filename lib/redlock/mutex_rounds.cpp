// Rounds and releases of one mutex, from its configuration.

#include "redlock/mutex_rounds.hpp"

#include "redlock/release_sender.hpp"
#include "redlock/script_answers.hpp"

namespace redsync::detail {

round_sender script_sender(const mutex_state& st, const script_call& call, fallback_wanted wanted) {
  return [mode = st.eng.script_mode(), call, route = st.route, timeout = st.timeout,
          wanted = std::move(wanted)](std::size_t, member_slot pool, command_callback cb) {
    send_script(mode, pool, route, call, timeout, std::move(cb), wanted);
  };
}

round_spec mutex_round(const mutex_state& st, const script_call& call, classify_fn classify,
                       fallback_wanted wanted) {
  round_spec spec = mutex_round_without_sender(st, classify);
  spec.send = script_sender(st, call, std::move(wanted));
  return spec;
}

round_spec mutex_round_without_sender(const mutex_state& st, classify_fn classify) {
  round_spec spec;
  spec.classify = classify;
  spec.slot = st.slot;
  spec.quorum = st.eng.quorum();
  spec.fail_fast = st.opts.fail_fast;
  spec.shuffle = st.opts.shuffle_nodes;
  // One server under two names counts once: its later names are left out,
  // so neither an acquisition nor an extension counts it twice, and the
  // first name's SET is not beaten by its own twin (node_trust.hpp).
  spec.excluded_why = st.eng.trust(st.slot).later_names();
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
  send_script_in_order(st.eng.script_mode(), st.eng.at(i, st.slot), st.route, st.undo(), st.timeout,
                       [](command_result&&) {});
}

round_sender retried_release_sender(mutex_state& st) {
  return [e = &st.eng, call = st.release_call, route = st.route, timeout = st.timeout,
          give_up_at = std::chrono::steady_clock::now() + st.opts.expiry + st.drift,
          wanted = [s = st.shared_from_this(), gen = st.generation] { return s->generation == gen; }](
             std::size_t, member_slot pool, command_callback done) {
    send_release(*e, pool, route, call, timeout, give_up_at, wanted, std::move(done));
  };
}

void release_everywhere_retried(mutex_state& st) {
  const auto send = retried_release_sender(st);
  for (std::size_t i = 0; i < st.eng.size(); ++i) send(i, st.eng.at(i, st.slot), [](command_result&&) {});
}

errc holder_failure(const tally& t, std::size_t quorum) {
  if (t.ok + t.taken + t.missing >= quorum) return t.taken > 0 ? errc::taken : errc::expired;
  return errc::no_quorum;
}

errc acquire_failure(const tally& t, std::size_t n, std::size_t q) {
  if (t.ok >= q) return errc::validity_elapsed;
  const std::size_t unusable = t.failed + t.excluded + t.pending;
  if (t.taken > 0 && unusable <= n - q) return errc::busy;
  return errc::no_quorum;
}

}  // namespace redsync::detail
