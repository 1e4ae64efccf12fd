// WAIT behind an acquisition's script, and the member's yes judged by it.

#include "redlock/trust/durable_wait.hpp"

#include "redlock/trust/failover_check_test_access.hpp"

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

  member_slot to;

  // Exactly once: when the script's answer is not a yes (at once), else when
  // the WAIT behind the form that answered has answered.
  void settle() {
    if (!done || !script) return;
    command_result& s = *script;
    const bool yes =
        s.status == transport_status::ok && !s.value.is_error() && classify(s.value) == node_status::ok;
    if (!yes) return finish(std::move(s));
    if (spec.replicas_unknown) {
      return refuse(s, fmt::format("failover check: {} ran the script, and this member's slot map does not "
                                   "know its replicas yet (a MOVED named it): no vote until the map is read",
                                   s.served_by.empty() ? std::string("the slot's master") : s.served_by));
    }
    if (!spec.master.empty() && s.served_by != spec.master && !needs_no_wait(s.served_by)) {
      return refuse(
          s, fmt::format("failover check: the script was redirected from {} to {}, whose replicas "
                         "this member's slot map does not know yet: no vote until the map is read",
                         spec.master, s.served_by.empty() ? std::string("another master") : s.served_by));
    }
    if (spec.replicas == 0) return finish(std::move(s));
    if (forms_when_answered == 0 || !waits[forms_when_answered - 1]) return;
    const command_result& w = *waits[forms_when_answered - 1];
    const char* rule = spec.failover_check ? "failover check" : "durable";
    std::string why;
    if (w.status != transport_status::ok) {
      why = fmt::format("{}: WAIT {} {} got no answer ({})", rule, spec.replicas, spec.wait.count(),
                        w.error.empty() ? "timeout" : w.error);
    } else if (w.value.is_error()) {
      // The server's words first: classify_server_error reads NOPERM (an
      // ACL without +wait) from them.
      why = fmt::format("{} (from WAIT {} {}, which {} sends)", w.value.str, spec.replicas, spec.wait.count(),
                        spec.failover_check ? "the failover check of a cluster member with replicas"
                                            : "mutex_options::durable_replicas");
    } else if (w.value.type != reply::kind::integer) {
      why = fmt::format("{}: WAIT {} {} gave an unexpected reply", rule, spec.replicas, spec.wait.count());
    } else if (w.served_by != s.served_by) {
      why = fmt::format("{}: WAIT ran on {}, the script on {} (redirected)", rule, w.served_by, s.served_by);
    } else if (w.value.integer < spec.replicas) {
      why = spec.failover_check
                ? fmt::format(
                      "failover check: {} of the {} replicas of {} acknowledged within {} ms: it may "
                      "have been replaced by one of them, so its yes does not count",
                      w.value.integer, spec.replicas, s.served_by, spec.wait.count())
                : fmt::format("durable: {} of {} replicas acknowledged within {} ms", w.value.integer,
                              spec.replicas, spec.wait.count());
    }
    if (why.empty()) return finish(std::move(s));
    refuse(s, std::move(why));
  }

  // A script that a MOVED sent to `master` needs no WAIT when none was
  // asked for and the map, as the MOVED left it, has `master` serve the
  // slot with no replica listed (a migration to a known master without
  // replicas): the rule's own assumption, as for a call sent there first.
  // A master only the MOVED named has unknown replicas (-1), an ASK leaves
  // the owner unchanged: both refused.
  bool needs_no_wait(const std::string& master) const {
    const cluster_router* router = to.m != nullptr && to.is_cluster() ? to.m->router() : nullptr;
    return spec.replicas == 0 && router != nullptr && router->owner_address(to.slot) == master &&
           router->replicas_of(to.slot) == 0;
  }

  void refuse(const command_result& s, std::string why) {
    // The map may be out of date (a replica gone, a failover): read it
    // again, so the next attempt asks for what the shard has now.
    if (to.m != nullptr && to.is_cluster() && to.m->router() != nullptr) to.m->router()->refresh_soon();
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

durable_spec wait_needed(const durable_spec& durable, member_slot to, microseconds command_timeout) {
  // The chaos meta-test's switch (failover_check_test_access.hpp): every
  // shard as if it had no replica; durable mode stays.
  if (!to.is_cluster() || failover_check_test_access::disabled()) return durable;
  const int listed = to.m->router()->replicas_of(to.slot);
  durable_spec spec = durable;
  if (listed < 0) {
    spec.replicas_unknown = true;
    spec.failover_check = true;
    return spec;
  }
  spec.master = to.m->router()->owner_address(to.slot);
  if (listed <= durable.replicas) return spec;
  spec.failover_check = true;
  spec.replicas = listed;
  if (spec.wait.count() == 0)
    spec.wait = std::max(milliseconds{1}, std::chrono::duration_cast<milliseconds>(command_timeout / 2));
  // A handful of distinct commands per process (one per replica count and
  // timeout): cached, so the hot path does not encode it again.
  static thread_local std::vector<std::pair<std::pair<int, long long>, wire_command>> cache;
  const std::pair<int, long long> k{spec.replicas, static_cast<long long>(spec.wait.count())};
  for (const auto& [key, cmd] : cache)
    if (key == k) {
      spec.wait_command = cmd;
      return spec;
    }
  spec.wait_command = encode_command({"WAIT", std::to_string(k.first), std::to_string(k.second)});
  if (cache.size() < 64) cache.emplace_back(k, spec.wait_command);
  return spec;
}

void send_script_durable(script_mode mode, member_slot pool, std::uint64_t route, const script_call& call,
                         microseconds timeout, command_callback done, fallback_wanted wanted,
                         const durable_spec& spec, node_status (*classify)(const reply&)) {
  auto j = std::make_shared<durable_join>();
  j->spec = spec;
  j->classify = classify;
  j->done = std::move(done);
  j->to = pool;
  script_sent behind;
  if (spec.replicas > 0)
    behind = [j, route](member_slot to, microseconds left) {
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
