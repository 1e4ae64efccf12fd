#pragma once

// TEST ONLY: known-unsafe semaphores for the tests that must show what the
// safe quorum and the slot rule prevent (tests/redis/redlock/
// semaphore_quorum_meta_test.cpp, the chaos meta-test). Never part of the
// API: it lives in lib/ (not include/redsync/), its symbols are hidden in
// the shared library, and only programs linked with the internal objects
// (redsync_internal_dep) can call it.
//
// Why this shape: the Semaphore's constructor is private and the quorum
// below the bound is refused by Redsync::new_semaphore, as it must be for
// every user. A friend struct reaches the constructor without a new option
// field or an environment switch that a deployment could turn on by mistake,
// and costs the public header one friend line. The unsafe state is built
// from a checked Semaphore's, so everything else (engine, options, keys)
// is exactly what the API makes.

#include <redsync/redsync.hpp>
#include <redsync/semaphore.hpp>

#include <cstddef>
#include <string>

namespace redsync::detail {

struct unsafe_semaphore_config {
  // Nodes that must grant, with no lower bound (0 = the safe bound).
  std::size_t quorum = 0;
  // Nodes grant any slot while fewer than k permits are live: rule S of
  // semaphore_scripts.hpp is off, only rule K (the count) remains.
  bool count_only = false;
};

struct semaphore_test_access {
  // A Semaphore as rs.new_semaphore(name, permits, options) makes it, then
  // with `unsafe` applied. Throws config_error as new_semaphore does, and
  // std::logic_error for count_only with script_mode::functions (the
  // count-only script is not in the function library) or a quorum above N.
  static Semaphore make_unsafe(Redsync& rs, std::string name, int permits, semaphore_options options,
                               unsafe_semaphore_config unsafe);
};

}  // namespace redsync::detail
