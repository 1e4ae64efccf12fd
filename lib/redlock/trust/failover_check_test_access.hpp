#pragma once

// TEST ONLY: the failover check (durable_wait.hpp) switched off, for the
// chaos meta-test that must show what it prevents (docs/chaos.md,
// "meta-cluster-failover-unchecked": a stale master's yes counted, two
// holders). Never part of the API: it lives in lib/ (not include/redsync/),
// its symbols are hidden in the shared library, and only programs linked
// with the internal objects (redsync_internal_dep) can call it.
//
// Why this shape: the check has no option and must not get one. A function
// here reaches it without a field in mutex_options or an environment switch
// that a deployment could turn on by mistake. Durable mode
// (mutex_options::durable_replicas) is not affected: only the WAIT the
// failover check adds on cluster members goes.

namespace redsync::detail {

struct failover_check_test_access {
  // From now on, in the whole process, a cluster member's yes counts as if
  // the slot's shard had no replica (and as if a master a MOVED named had a
  // known shard): no WAIT unless durable_replicas asks for one. There is no
  // way back; call it before the first Redsync is made.
  static void disable();
  // Whether disable() was called (wait_needed reads it).
  static bool disabled() noexcept;
};

}  // namespace redsync::detail
