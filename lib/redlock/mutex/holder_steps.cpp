// The holder's calls' decisions: whether a call may go out, what its round's
// answers mean, and the validity an extension leaves.

#include "redlock/mutex/holder_steps.hpp"

#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/quorum.hpp"

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using holder_kind = holder_step::kind;

holder_step holder_steps::finish(errc why) {
  phase_ = phase::done;
  return {.what = holder_kind::finish, .error = why};
}

holder_step holder_steps::start(clock::time_point now, clock::time_point deadline,
                                const holder_facts& facts) {
  if (phase_ != phase::not_started) return {};
  // Unlock: cleanup is never skipped because a deadline passed or the
  // caller cancelled.
  if (rules_.call == holder_call::release) {
    if (!facts.has_value) {
      // Released already (a reentrant mutex: by an earlier unlock after its
      // loss): a hold still owed is paid, and nothing is sent.
      step done = finish(errc::not_held);
      done.drop_hold = facts.holds > 0 && !rules_.every_hold;
      return done;
    }
    // Reentrant: an inner unlock. Once the lock is lost or past its
    // validity the release goes out instead, and reports what the nodes say.
    if (drops_a_hold(facts, now)) {
      step done = finish({});
      done.drop_hold = true;
      return done;
    }
    phase_ = phase::round;
    return {.what = holder_kind::send_release};
  }
  // The watchdog stopped (a release is on its way): no late extension.
  if (rules_.call == holder_call::auto_extend && !facts.watchdog_active) return finish(errc::not_held);
  if (deadline <= now) return finish(errc::deadline_exceeded);
  if (!facts.has_value) return finish(errc::not_held);
  // Once lost or let go, the acquisition is over: no extension may re-arm
  // its keys.
  if (extends() && facts.lost) return finish(errc::lost);
  if (extends() && facts.let_go) return finish(errc::not_held);
  phase_ = phase::preparing;
  return {.what = holder_kind::prepare_round};
}

holder_step holder_steps::on_released(const tally& t, bool lost) {
  if (phase_ != phase::round || rules_.call != holder_call::release) return {};
  const bool ok = t.ok >= rules_.quorum;
  errc why = ok ? errc{} : holder_failure(t, rules_.quorum);
  // The keys are released either way; the caller must still learn that
  // the lock had been lost while they thought they held it.
  if (lost) why = errc::lost;
  step done = finish(why);
  // Released, or known to be gone (expired/taken on a quorum): this
  // acquisition is over either way. After no_quorum it may still be on
  // some nodes, so a retried unlock must still be possible.
  done.mark_released = ok || why != errc::no_quorum;
  return done;
}

// A shorter TTL than the one the keys have: every node that applies it
// keeps the key only until about start + duration, whatever this round's
// outcome (a failed or abandoned round may still have reached some of the
// quorum the old validity rests on), so the validity is cut to that before
// anything is sent. A longer one changes nothing here.
holder_step holder_steps::on_round_ready(clock::time_point now) {
  if (phase_ != phase::preparing) return {};
  phase_ = phase::round;
  round_start_ = now;
  step send{.what = holder_kind::send_round};
  if (extends() && rules_.duration != rules_.expiry) {
    send.cut_validity = true;
    send.valid_until = now + rules_.duration - rules_.drift;
  }
  return send;
}

holder_step holder_steps::on_answered(const tally& t, clock::time_point now) {
  if (phase_ != phase::round || rules_.call == holder_call::release) return {};
  if (t.ok < rules_.quorum) return finish(holder_failure(t, rules_.quorum));
  if (!extends()) return finish({});
  // The new validity, as for an acquisition, from this round's start.
  const auto elapsed = duration_cast<microseconds>(now - round_start_);
  if (validity(rules_.duration, elapsed, rules_.drift) <= microseconds::zero())
    return finish(errc::validity_elapsed);
  phase_ = phase::setting_validity;
  return {.what = holder_kind::set_validity, .valid_until = round_start_ + rules_.duration - rules_.drift};
}

// The loss was reported while this extension was in flight (the watchdog
// does not wait for it past until - margin). The holder has been told to
// stop, so the keys it just re-armed are released rather than left to
// block others for another expiry.
holder_step holder_steps::on_validity_set(bool lost) {
  if (phase_ != phase::setting_validity) return {};
  if (!lost) return finish({});
  step done = finish(errc::lost);
  done.release_everywhere = true;
  return done;
}

}  // namespace redsync::detail
