// What `redsync lock` holds once acquired: the mutex NAME, or with -n a
// permit of the semaphore NAME. The rest of the run (lock_command.cpp) goes
// through these, and treats both alike.

#include "lock_run.hpp"

#include <fmt/format.h>

namespace redsync::cli {

std::chrono::steady_clock::time_point lock_run::held_until() const {
  return cfg_.semaphore() ? permit_.until() : held().until();
}

bool lock_run::held_lost() const {
  return cfg_.semaphore() ? permit_.lost() : held().lost();
}

std::stop_token lock_run::held_lost_token() const {
  return cfg_.semaphore() ? permit_.lost_token() : held().lost_token();
}

result lock_run::release_held() {
  return cfg_.semaphore() ? permit_.release(context{}) : held().unlock(context{});
}

// A permit's id is random, not a holder value: REDSYNC_LOCK_VALUE would
// mislead a script that passes it to `redsync status --value`.
std::vector<std::pair<std::string, std::string>> lock_run::held_environment() const {
  if (!cfg_.semaphore()) {
    return {{"REDSYNC_LOCK_NAME", cfg_.name},
            {"REDSYNC_LOCK_VALUE", held().value()},
            {"REDSYNC_FENCING_TOKEN", std::to_string(held().token().value)}};
  }
  return {{"REDSYNC_LOCK_NAME", cfg_.name},
          {"REDSYNC_PERMITS", std::to_string(*cfg_.permits)},
          {"REDSYNC_PERMIT_ID", permit_.id()},
          {"REDSYNC_SLOT", std::to_string(permit_.slot())},
          {"REDSYNC_FENCING_TOKEN", std::to_string(permit_.token().value)}};
}

std::string lock_run::what() const {
  if (!cfg_.semaphore()) return fmt::format("lock \"{}\"", cfg_.name);
  if (!permit_.id().empty())
    return fmt::format("permit (slot {}) of semaphore \"{}\"", permit_.slot(), cfg_.name);
  return fmt::format("a permit of semaphore \"{}\"", cfg_.name);
}

}  // namespace redsync::cli
