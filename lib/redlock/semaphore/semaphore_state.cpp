// A semaphore's configuration and its permits' identities.

#include "redlock/semaphore/semaphore_state.hpp"

#include "redlock/quorum.hpp"
#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "redlock/scripts/server_mark.hpp"
#include "redlock/semaphore/permit_operations.hpp"
#include "redlock/trust/durable_wait.hpp"

#include <fmt/format.h>

namespace redsync::detail {

semaphore_state::semaphore_state(engine& e, std::string n, int k, std::size_t q, semaphore_options o)
    : eng(e),
      name(std::move(n)),
      permits(k),
      permits_text(std::to_string(k)),
      quorum(q),
      opts(std::move(o)),
      set_key(semaphore_set_key(name)),
      permits_key(semaphore_permits_key(name)),
      line_key(semaphore_line_key(set_key)),
      leases_key(semaphore_leases_key(set_key)),
      mutex_key(name),
      channel(semaphore_channel(name)),
      held_as_mutex(std::make_shared<const std::string>(fmt::format("\"{}\" is held as a mutex", name))),
      clustered(e.has_cluster_members()),
      slot(clustered ? cluster_name_slot(name) : std::uint16_t{0}),
      cluster_set_key(clustered ? cluster_semaphore_set_key(name) : std::string()),
      cluster_permits_key(clustered ? cluster_set_key + ":permits" : std::string()),
      cluster_line_key(clustered ? semaphore_line_key(cluster_set_key) : std::string()),
      cluster_leases_key(clustered ? semaphore_leases_key(cluster_set_key) : std::string()),
      cluster_mutex_key(clustered ? cluster_lock_key(name) : std::string()),
      cluster_channel(clustered ? semaphore_channel(cluster_lock_key(name)) : std::string()),
      cluster_record(clustered ? cluster_record_key(slot) : std::string()),
      cluster_server_mark(clustered ? cluster_server_mark_key(slot) : std::string()),
      route(std::hash<std::string_view>{}(set_key)),
      timeout(command_timeout(opts.expiry, opts.timeout_factor)),
      drift(detail::drift(opts.expiry, opts.drift_factor)),
      expiry_ms(std::to_string(opts.expiry.count())) {}

script_call semaphore_state::call(const lua_script& s, keys_of which, std::vector<std::string_view> args,
                                  std::size_t channel_arg) const {
  const auto keys = [which](std::string_view set, std::string_view permits, std::string_view lock,
                            std::string_view record, std::string_view line, std::string_view leases,
                            std::string_view mark = {}) -> std::vector<std::string_view> {
    switch (which) {
      case keys_of::acquire:
        if (!mark.empty()) return {set, permits, lock, record, line, leases, mark};
        return {set, permits, lock, record, line, leases};
      case keys_of::release: return {set, permits, lock, line, leases};
      case keys_of::holder: return {set, permits, lock};
      case keys_of::fence: break;
    }
    return {set, record};
  };
  script_call c =
      make_script_call(s, keys(set_key, permits_key, mutex_key, record_key, line_key, leases_key), args);
  if (!clustered) return c;
  if (channel_arg < args.size()) args[channel_arg] = cluster_channel;
  add_cluster_form(c,
                   keys(cluster_set_key, cluster_permits_key, cluster_mutex_key, cluster_record,
                        cluster_line_key, cluster_leases_key, cluster_server_mark),
                   args);
  return c;
}

round_spec semaphore_state::round(const script_call& call, classify_fn classify, fallback_wanted wanted,
                                  bool failover_check) const {
  round_spec spec;
  spec.send = [mode = eng.script_mode(), call, route = route, timeout = timeout, wanted = std::move(wanted),
               failover_check, classify](std::size_t, member_slot pool, command_callback cb) {
    if (failover_check) {
      if (const durable_spec spec = wait_needed(durable_spec{}, pool, timeout))
        return send_script_durable(mode, pool, route, call, timeout, std::move(cb), wanted, spec, classify);
    }
    send_script(mode, pool, route, call, timeout, std::move(cb), wanted);
  };
  spec.classify = classify;
  spec.slot = slot;
  spec.quorum = quorum;
  // One server under two names counts once (node_trust.hpp).
  spec.excluded_why = eng.trust(slot).later_names();
  if (!spec.excluded_why.empty()) {
    spec.excluded.resize(spec.excluded_why.size());
    for (std::size_t i = 0; i < spec.excluded_why.size(); ++i)
      spec.excluded[i] = !spec.excluded_why[i].empty();
  }
  return spec;
}

permit_state::permit_state(std::shared_ptr<semaphore_state> s, std::string permit_id,
                           std::uint32_t permit_slot)
    : sem(std::move(s)),
      id(std::move(permit_id)),
      slot(permit_slot),
      member(permit_member(slot, id)),
      release_call(sem->call(semaphore_release_script(), semaphore_state::keys_of::release,
                             {member, sem->channel, sem->permits_text, "", "", ""}, 1)),
      extend_call(
          sem->call(semaphore_extend_script(), semaphore_state::keys_of::holder, {member, sem->expiry_ms})) {}

void permit_state::mark_granted(clock::time_point attempt_start, clock::time_point valid_until) {
  {
    std::lock_guard lk(mu);
    until = valid_until;
    held = true;
  }
  if (!sem->opts.auto_extend) return;
  wd = std::make_unique<watchdog>(sem->eng, *this, watch_settings::of(sem->opts, sem->timeout));
  wd->start(attempt_start);
}

permit_state::clock::time_point permit_state::valid_until() const {
  std::lock_guard lk(mu);
  return until;
}

void permit_state::extend_automatically() {
  submit_extend(
      shared_from_this(), {},
      [self = shared_from_this()](result r) {
        if (self->wd) self->wd->on_extended(r);
      },
      extension_kind::automatic);
}

void permit_state::mark_lost(const result& why) {
  // The lost token's callbacks may drop the last handle (watchdog.hpp).
  const auto keep_alive = shared_from_this();
  {
    std::lock_guard lk(mu);
    held = false;
  }
  lost.request_stop();
  sem->eng.telemetry().permit_lost(*this, why);
}

}  // namespace redsync::detail
