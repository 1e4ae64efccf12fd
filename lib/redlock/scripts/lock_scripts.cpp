// Which scripts each kind of hold sends (lock_scripts.hpp).

#include "redlock/scripts/lock_scripts.hpp"

#include "redlock/scripts/script_cache.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"

namespace redsync::detail {

const lock_scripts& scripts_for(hold_kind kind) {
  static const lock_scripts writer{acquire_script(),
                                   leave_script(),
                                   release_script(),
                                   extend_script(),
                                   check_script(),
                                   fence_script(),
                                   true};
  static const lock_scripts reader{embedded_script<lua::rw_acquire, lua::rw_acquire_cluster>(),
                                   embedded_script<lua::rw_leave, lua::rw_leave_cluster>(),
                                   embedded_script<lua::rw_release, lua::rw_release_cluster>(),
                                   embedded_script<lua::rw_extend>(),
                                   embedded_script<lua::rw_check>(),
                                   semaphore_fence_script(),  // a member of a set, as a permit
                                   false};
  return kind == hold_kind::shared ? reader : writer;
}

std::string readers_key(std::string_view name) {
  return std::string(name) + ":redsync-readers";
}

}  // namespace redsync::detail
