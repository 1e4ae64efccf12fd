// redsync::guard: lock on construction, release at the end of the scope.

#include <redsync/guard.hpp>

namespace redsync {

guard::guard(Mutex& mutex, const context& ctx) : mutex_(mutex), acquired_(mutex.lock(ctx)) {
  owns_ = acquired_.ok();
}

guard::~guard() {
  if (!owns_) return;
  try {
    (void)mutex_.unlock(context{});
  } catch (...) {
    // Destructors never throw; the outcome stays in mutex.last_result().
  }
}

result guard::unlock(const context& ctx) {
  if (!owns_) {
    result r;
    r.error = make_error_code(errc::not_held);
    return r;
  }
  owns_ = false;
  return mutex_.unlock(ctx);
}

}  // namespace redsync
