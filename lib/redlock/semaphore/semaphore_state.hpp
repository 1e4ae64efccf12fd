#pragma once

// What a Semaphore and its permits point at: the semaphore's configuration
// (immutable once made, so any thread may read it), and per permit its
// identity (immutable once granted) and validity (guarded by `mu`).
// Operations (bounded_operation.hpp) run on the loop thread.

#include "redlock/engine/engine.hpp"
#include "redlock/engine/round.hpp"
#include "redlock/engine/watchdog.hpp"
#include "redlock/scripts/script_call.hpp"

#include <redsync/semaphore.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

struct semaphore_state {
  // `quorum` is already checked (semaphore_quorum.hpp), and `opts` too.
  semaphore_state(engine& e, std::string n, int k, std::size_t q, semaphore_options o);

  engine& eng;
  const std::string name;
  const int permits;
  const std::string permits_text;  // ARGV k
  const std::size_t quorum;
  const semaphore_options opts;
  const std::string set_key;
  const std::string permits_key;
  const std::string line_key;    // the permits' waiting line (rule F)
  const std::string leases_key;  // its waiters' leases
  // The name's lock key (the key a Mutex of the name sets: the name), where
  // the permits keep the kind mark (semaphore_scripts.hpp, rule X).
  const std::string mutex_key;
  const std::string channel;
  // What a refusal for a mutex's value says (round_spec::other_kind_why).
  const std::shared_ptr<const std::string> held_as_mutex;
  // On a cluster member (docs/cluster.md) the keys carry the name's hash
  // tag as a Mutex's do ("redsync:sem:" + cluster_lock_key(name), ...), and
  // the node record is the one of the name's slot. Without cluster members
  // `clustered` is false and `slot` 0; standalone keys are unchanged.
  const bool clustered;
  const std::uint16_t slot;
  const std::string cluster_set_key;
  const std::string cluster_permits_key;
  const std::string cluster_line_key;
  const std::string cluster_leases_key;
  const std::string cluster_mutex_key;  // cluster_lock_key(name): the set's hash tag, so its slot
  const std::string cluster_channel;
  const std::string cluster_record;
  const std::string cluster_server_mark;    // its server mark (server_mark.hpp)
  const std::uint64_t route;                // picks the connection on each node
  const std::chrono::microseconds timeout;  // per-node command timeout
  const std::chrono::microseconds drift;    // expiry * drift_factor + 2 ms
  const std::string expiry_ms;
  // TEST ONLY (semaphore_test_access.hpp): nodes count permits but ignore
  // slots (semaphore_acquire_count_only_script). Set before the state is
  // shared, never changed after; false for every Semaphore of the API.
  bool count_only = false;

  // Script KEYS, views into the keys above: acquire = set, permits, lock
  // key, record, line, leases; release (and undo, leave) = set, permits,
  // lock key, line, leases; holder (extend) = set, permits, lock key;
  // fence = set, record.
  enum class keys_of { acquire, release, holder, fence };
  // `s` with these KEYS and `args`, plus its cluster form when the set has
  // cluster members (the cluster keys; the argument at `channel_arg`, if
  // any, becomes the cluster channel).
  script_call call(const lua_script& s, keys_of which, std::vector<std::string_view> args,
                   std::size_t channel_arg = no_channel) const;
  static constexpr std::size_t no_channel = ~std::size_t{0};
  // A round of `call` to every node on this semaphore's route and quorum,
  // leaving out the later names of one server (node_trust::later_names).
  // A script that may grant a permit passes `wanted` (script_call.hpp).
  // `failover_check`: on a cluster member a yes counts only with the WAIT of
  // durable_wait.hpp (acquisitions and extensions).
  round_spec round(const script_call& call, classify_fn classify, fallback_wanted wanted = {},
                   bool failover_check = false) const;
};

// A permit is its own holder: it owns its watchdog (auto_extend) and stops
// it before a release is sent (permit_operations.cpp).
struct permit_state final : std::enable_shared_from_this<permit_state>, watchdog::holder {
  using clock = std::chrono::steady_clock;

  permit_state(std::shared_ptr<semaphore_state> s, std::string permit_id, std::uint32_t permit_slot);

  const std::shared_ptr<semaphore_state> sem;
  const std::string id;
  const std::uint32_t slot;
  const std::string member;
  const script_call release_call;  // wakes the waiter the freed permit lets in
  const script_call extend_call;
  fencing_token token{};  // set once, before the permit is handed out

  mutable std::mutex mu;
  clock::time_point until{};
  bool held = false;      // granted, and neither released nor lost
  bool released = false;  // a release has started (held is false from then)
  std::stop_source lost;  // stopped when the watchdog declares the permit lost

  // Loop thread. Present while auto-extended (semaphore_options::auto_extend).
  std::unique_ptr<watchdog> wd;

  // Loop thread: the permit was granted until `valid_until`, its validity
  // counted from `attempt_start`; starts the watchdog if auto_extend is on.
  void mark_granted(clock::time_point attempt_start, clock::time_point valid_until);

  // The watchdog's view (watchdog.hpp). Loop thread.
  clock::time_point valid_until() const override;
  void extend_automatically() override;
  void mark_lost(const result& why) override;

  // The public handle of a granted permit.
  static redsync::permit wrap(std::shared_ptr<permit_state> st) { return redsync::permit(std::move(st)); }
};

}  // namespace redsync::detail
