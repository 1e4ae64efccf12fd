// One attempt of a Mutex's acquisition on the wire (acquisition_operation.hpp):
// the acquire script to each node with the waiting line's call for it, a
// WAIT behind it where durability asks, one call per slot group on a
// cluster member, and the transaction for the first attempt of a
// single-name lock.

#include "redlock/mutex/acquisition_operation.hpp"

#include "redlock/mutex/slot_groups.hpp"
#include "redlock/scripts/fast_acquire.hpp"
#include "redlock/scripts/script_answers.hpp"

#include <string>

namespace redsync::detail {

// Step 2: the acquire script, with the waiting line's call for node i. One
// call per slot group on a cluster member, whose groups make one
// all-or-nothing vote (group_votes.hpp).
round_sender acquisition::script_sender() {
  return [self = self(), wanted = answer_awaited()](std::size_t i, member_slot pool, command_callback done) {
    acquisition& a = *self;
    a.line_->on_script_sent(i);
    send_to_member(
        pool, a.line_->call_for(i), a.st_->slots,
        [&a, &wanted](member_slot to, const script_call& form, command_callback d) {
          // Durable mode, and on a cluster member the failover check
          // (durable_wait.hpp): a WAIT behind the script.
          if (const durable_spec spec = wait_needed(a.durable_, to, a.st_->timeout))
            return send_script_durable(a.eng_.script_mode(), to, a.st_->route, form, a.st_->timeout,
                                       std::move(d), wanted, spec, classify_acquire);
          send_script(a.eng_.script_mode(), to, a.st_->route, form, a.st_->timeout, std::move(d), wanted);
        },
        [self, i](std::vector<command_result>&& groups) {
          return self->votes_->combine(i, std::move(groups));
        },
        std::move(done));
  };
}

// Whether this attempt's answers are still awaited: not once its round
// reported or the acquisition finished, when the attempt's release may
// already be queued on the node's connection (script_call.hpp).
fallback_wanted acquisition::answer_awaited() {
  return [self = self(), round = rounds_reported_] {
    return !self->finished() && self->rounds_reported_ == round;
  };
}

// Step 2 without a script where it can (fast_acquire.hpp): the first
// attempt of a single-name lock sends the transaction to every node whose
// recorded window covers our expiry, and the acquire script (`script`) to
// the others. Where the transaction's SET NX lost and we wait, the script
// follows on the same connection within the command timeout's remainder,
// so we join the line there; unless the round has reported by then: a
// release sent after the report must not be overtaken by a later SET.
round_sender acquisition::fast_sender(round_sender script) {
  return [self = self(), script = std::move(script), round = rounds_reported_](
             std::size_t i, member_slot pool, command_callback done) mutable {
    acquisition& a = *self;
    // The transaction names the standalone record: a cluster member
    // always gets the script.
    if (pool.is_cluster() || !a.eng_.trust(a.st_->slot).window_covers(i, a.st_->opts.expiry))
      return script(i, pool, std::move(done));
    auto on_exec = [self, round, i, pool, done = std::move(done)](command_result&& r) mutable {
      acquisition& a = *self;
      // Finished (abandoned, or shut down with an engine that may be gone
      // by now): nothing below is wanted, and the engine must not be used.
      if (a.finished()) return done(std::move(r));
      if (r.status == transport_status::ok) r.value = fast_acquire_answer(std::move(r.value));
      if (r.status == transport_status::ok && r.value.is_error()) {
        // This node cannot run the transaction (an ACL written before it
        // existed, say): the script from now on, and one more attempt at
        // once that does not count as a try.
        a.eng_.trust(a.st_->slot).transaction_refused(i);
        a.steps_.on_transaction_refused();
        // An EXEC the server does not know (renamed away, or a proxy that
        // refuses it) leaves the connection inside MULTI, where every
        // later command, our release included, would only be QUEUED.
        // DISCARD ends it there, before the release this error leads to.
        // An EXEC refused by the ACL ends the transaction itself
        // (EXECABORT), so a user without +discard is not asked for it.
        if (r.value.str.find("unknown command") != std::string::npos)
          pool.send(a.st_->route, discard_command(), a.st_->timeout, [](command_result&&) {});
      }
      const bool lost = r.status == transport_status::ok && r.value.type == reply::kind::nil;
      const auto left = a.st_->timeout - r.latency;
      if (!lost || !a.blocking_ || a.finished() || a.rounds_reported_ != round ||
          left <= std::chrono::microseconds::zero())
        return done(std::move(r));
      a.line_->on_script_sent(i);
      send_script(
          a.eng_.script_mode(), pool, a.st_->route, a.line_->call_for(i), left,
          [first = r.latency, done = std::move(done)](command_result&& joined) {
            joined.latency += first;
            done(std::move(joined));
          },
          a.answer_awaited());
    };
    pool.send(a.st_->route, a.fast_wire_, a.st_->timeout, std::move(on_exec), fast_acquire_replies);
  };
}

}  // namespace redsync::detail
