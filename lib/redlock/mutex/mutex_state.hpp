#pragma once

// What a Mutex handle points at: its configuration, the commands for the
// current value, and the state visible to every thread. Operations (acquire,
// release, extend, check) run one at a time on the loop thread.

#include "redlock/engine/engine.hpp"
#include "redlock/engine/watchdog.hpp"
#include "redlock/mutex/acquisition_steps.hpp"
#include "redlock/scripts/lock_keys.hpp"
#include "redlock/scripts/lock_scripts.hpp"
#include "redlock/scripts/scripts.hpp"

#include <redsync/context.hpp>
#include <redsync/error.hpp>
#include <redsync/mutex.hpp>
#include <redsync/options.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace redsync::detail {

enum class op_kind { acquire, try_acquire, release, extend, check, auto_extend };

struct mutex_state final : std::enable_shared_from_this<mutex_state>, watchdog::holder {
  using clock = std::chrono::steady_clock;

  // `kind`: shared for an RWMutex's reader (one name), whose calls send the
  // reader's scripts and keys (lock_scripts.hpp).
  mutex_state(engine& e, std::vector<std::string> n, mutex_options o, hold_kind k = hold_kind::exclusive);

  engine& eng;
  const std::vector<std::string> names;  // one, or several (sorted) for a multi-name lock
  const std::string& name;               // names[0]
  const hold_kind kind;
  const lock_scripts& scripts;  // what this kind of hold sends
  // What a refusal for a semaphore's mark says (round_spec::other_kind_why).
  const std::shared_ptr<const std::string> held_as_semaphore;
  // The lock's keys on a standalone member, and on a cluster member per
  // slot group (no groups when the set has no cluster member). lock_keys.hpp.
  const lock_keys plain;
  const cluster_layout clustered;
  // The slots of the names' groups on a cluster member, ascending ({0}
  // without cluster members); a cluster member gets one call per slot
  // (slot_groups.hpp). `slot` is the first: the trust a standalone member's
  // one answer is judged by.
  const std::vector<std::uint16_t> slots;
  const std::uint16_t slot;
  const std::vector<std::string_view>& keys;  // names, as script KEYS (standalone)
  const mutex_options opts;
  const std::uint64_t route;                // picks the connection on each node
  const std::chrono::microseconds timeout;  // per-node command timeout
  const std::chrono::microseconds drift;    // expiry * drift_factor + 2 ms
  const std::string expiry_ms;              // PX argument
  // The longest a head of the waiting line waits between two attempts (it
  // refreshes its lease that often, so a head that crashed holds a free
  // lock up for at most about three of these plus a second): one command
  // timeout plus the longest default retry delay. waiting_line.hpp.
  const std::chrono::milliseconds head_refresh;
  // Per name, in the order of `names` (standalone layout):
  const std::vector<std::string>& line_keys;   // waiters for the name, oldest first
  const std::vector<std::string>& lease_keys;  // each waiter's lease in that line
  const std::vector<std::string>& channels;    // where releases of the name are announced

  // Guarded by `mu`: read from any thread, written on the loop thread.
  mutable std::mutex mu;
  std::string value;
  clock::time_point until{};
  bool held = false;      // acquired and not yet released
  bool released = false;  // the last acquisition is over (released, or gone on a quorum)
  result last;
  fencing_token token{};
  std::stop_source lost;  // a fresh source per acquisition
  // mutex_options::reentrant (docs/api.md, "Reentrancy"): the unlocks the
  // current acquisition still awaits (1 once acquired, one more per
  // re-entry) and the thread that acquired it, whose lock calls re-enter.
  // Not reset by a loss, so the owner's next lock learns of it (and resets
  // it) instead of starting afresh; 0 once the release went out. Always 0
  // on a mutex that is not reentrant.
  std::size_t holds = 0;
  std::thread::id owner{};

  // Loop thread only: operations wait here and run one at a time, so a
  // release never overtakes the acquisition it undoes.
  std::deque<std::function<void()>> queue;
  bool busy = false;
  // Bumped when an acquisition starts: background retries of an earlier
  // release stop then.
  std::uint64_t generation = 0;
  // Commands for `value`, built once per acquisition.
  script_call release_call;  // the holder lets go, and leaves the lines
  script_call undo_call;     // a failed attempt gives back what it won, keeping its place in line
  script_call extend_call;
  // Present when auto_extend is on.
  std::unique_ptr<watchdog> wd;

  // `s` with the keys `which` picks and `args` (then the channels when
  // `channels`), in both layouts where the set has cluster members.
  script_call call(const lua_script& s, lock_keys_of which, const std::vector<std::string_view>& args,
                   bool channels) const {
    return make_lock_call(s, plain, clustered.groups, which, args, channels);
  }

  // Makes a value with the configured generator (caller's thread), with
  // the reader's tag in front for a reader.
  std::string make_value() const;
  std::string writer_value() const;

  // Loop thread. An acquisition of `v` started on thread `caller`: a
  // re-entry by the owner of a reentrant mutex (a hold added, or the reason
  // it cannot be), refused while the lock is still held, or else started:
  // stops the watchdog, resets the shared state, builds the release.
  claim_outcome claim(const std::string& v, std::thread::id caller);
  // Loop thread. undo_call for the current value (built on first use).
  const script_call& undo();
  // Loop thread. The acquisition started on `caller` succeeded: valid until
  // `valid_until`, with one hold.
  void mark_acquired(clock::time_point valid_until, fencing_token t, std::thread::id caller);
  // There is a value to act on (and, `for_release`, not yet released).
  bool has_value(bool for_release) const;
  std::string value_snapshot() const;

  // The watchdog's view (watchdog.hpp). Loop thread.
  clock::time_point valid_until() const override;
  void extend_automatically() override;
  void mark_lost(const result& why) override;

  // Who queues an operation. Only a blocking call re-enters a reentrant
  // mutex: the thread that waits in it is the one that holds the lock.
  // Asynchronous calls started on one thread (coroutines on one executor,
  // callbacks on the loop) are unrelated tasks, so none of them re-enters,
  // and an acquisition they make is re-entered by nobody. Only the
  // destructor's release lets go of every hold at once.
  enum class origin : unsigned char { blocking, async, destructor };
  // Queues an operation; `done` runs on the loop thread. `value_for_acquire`
  // is the value an acquisition will use; `extend_to` the TTL an extension
  // sets (zero: the expiry; checked by the caller, Mutex::extend_by). Without
  // `done` (a destructor's release) see bounded_operation::submit_unanswered.
  void submit(op_kind kind, origin from, const context& ctx, std::string value_for_acquire,
              std::function<void(result)> done,
              std::chrono::milliseconds extend_to = std::chrono::milliseconds::zero());
};

}  // namespace redsync::detail
