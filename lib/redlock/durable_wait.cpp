// WAIT behind an acquisition's script, and the member's yes judged by it.

#include "redlock/durable_wait.hpp"

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace redsync::detail {

namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

struct durable_join {
  using clock = std::chrono::steady_clock;
  durable_spec spec;
  node_status (*classify)(const reply&) = nullptr;
  clock::time_point started = clock::now();
  std::vector<std::optional<command_result>> waits;  // one per form sent, in order
  std::optional<command_result> script;              // the answer of the form that answered last
  std::size_t forms_when_answered = 0;               // forms sent when the script answered
  command_callback done;

  // Exactly once: when the script's answer is not a yes (at once), else when
  // the WAIT behind the form that answered has answered.
  void settle() {
    if (!done || !script) return;
    command_result& s = *script;
    const bool yes =
        s.status == transport_status::ok && !s.value.is_error() && classify(s.value) == node_status::ok;
    if (!yes) return finish(std::move(s));
    if (forms_when_answered == 0 || !waits[forms_when_answered - 1]) return;
    const command_result& w = *waits[forms_when_answered - 1];
    std::string why;
    if (w.status != transport_status::ok) {
      why = fmt::format("durable: WAIT {} {} got no answer ({})", spec.replicas, spec.wait.count(),
                        w.error.empty() ? "timeout" : w.error);
    } else if (w.value.is_error()) {
      // The server's words first: classify_server_error reads NOPERM (an
      // ACL without +wait) from them.
      why = fmt::format("{} (from WAIT {} {}, which mutex_options::durable_replicas sends)", w.value.str,
                        spec.replicas, spec.wait.count());
    } else if (w.value.type != reply::kind::integer) {
      why = fmt::format("durable: WAIT {} {} gave an unexpected reply", spec.replicas, spec.wait.count());
    } else if (w.served_by != s.served_by) {
      why = fmt::format("durable: WAIT ran on {}, the script on {} (redirected)", w.served_by, s.served_by);
    } else if (w.value.integer < spec.replicas) {
      why = fmt::format("durable: {} of {} replicas acknowledged within {} ms", w.value.integer,
                        spec.replicas, spec.wait.count());
    }
    if (why.empty()) return finish(std::move(s));
    // A non-vote whose SET ran: an error reply, so that a failed attempt
    // undoes it (acquisition.cpp step 5, group_votes.cpp).
    command_result out;
    out.value.type = reply::kind::error;
    out.value.str = std::move(why);
    out.served_by = s.served_by;
    finish(std::move(out));
  }

  void finish(command_result&& r) {
    r.latency = std::chrono::duration_cast<microseconds>(clock::now() - started);
    auto d = std::move(done);
    done = nullptr;
    d(std::move(r));
  }
};

}  // namespace

durable_spec durable_spec_of(const mutex_options& o, microseconds command_timeout) {
  durable_spec spec;
  if (o.durable_replicas <= 0) return spec;
  spec.replicas = o.durable_replicas;
  spec.wait = o.durable_wait_timeout.count() > 0
                  ? o.durable_wait_timeout
                  : std::max(milliseconds{1}, std::chrono::duration_cast<milliseconds>(command_timeout / 2));
  spec.wait_command =
      encode_command({"WAIT", std::to_string(spec.replicas), std::to_string(spec.wait.count())});
  return spec;
}

void send_script_durable(script_mode mode, member_slot pool, std::uint64_t route, const script_call& call,
                         microseconds timeout, command_callback done, fallback_wanted wanted,
                         const durable_spec& spec, node_status (*classify)(const reply&)) {
  auto j = std::make_shared<durable_join>();
  j->spec = spec;
  j->classify = classify;
  j->done = std::move(done);
  script_sent behind = [j, route](member_slot to, microseconds left) {
    const std::size_t n = j->waits.size();
    j->waits.emplace_back();
    to.send(route, j->spec.wait_command, left, [j, n](command_result&& r) {
      j->waits[n] = std::move(r);
      j->settle();
    });
  };
  send_script(
      mode, pool, route, call, timeout,
      [j](command_result&& r) {
        j->script = std::move(r);
        j->forms_when_answered = j->waits.size();
        j->settle();
      },
      std::move(wanted), std::move(behind));
}

}  // namespace redsync::detail
