// TEST ONLY: known-unsafe semaphores (semaphore_test_access.hpp).

#include "redlock/semaphore/semaphore_test_access.hpp"

#include "redlock/semaphore/semaphore_state.hpp"

#include <memory>
#include <stdexcept>

namespace redsync::detail {

Semaphore semaphore_test_access::make_unsafe(Redsync& rs, std::string name, int permits,
                                             semaphore_options options, unsafe_semaphore_config unsafe) {
  // Made through the API first: the same checks, the same engine.
  Semaphore safe = rs.new_semaphore(std::move(name), permits, std::move(options));
  const semaphore_state& checked = *safe.state_;
  if (unsafe.quorum > checked.eng.size())
    throw std::logic_error("make_unsafe: quorum above the number of nodes");
  if (unsafe.count_only && checked.eng.script_mode() != script_mode::eval)
    throw std::logic_error("make_unsafe: count_only needs script_mode::eval");
  auto st =
      std::make_shared<semaphore_state>(checked.eng, checked.name, checked.permits,
                                        unsafe.quorum != 0 ? unsafe.quorum : checked.quorum, checked.opts);
  st->count_only = unsafe.count_only;
  return Semaphore(std::move(st));
}

}  // namespace redsync::detail
