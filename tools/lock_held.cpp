// What `redsync lock` holds once acquired: the mutex NAME (exclusive, or
// with --shared a reader's hold of it), or with -n a permit of the
// semaphore NAME. The rest of the run (lock_command.cpp) goes through these,
// and treats them alike.

#include "lock_run.hpp"

#include <fmt/format.h>

#include <utility>

namespace redsync::cli {

Mutex new_holder(Redsync& rs, const lock_config& cfg, mutex_options options) {
  if (!cfg.shared) return rs.new_mutex(cfg.name, std::move(options));
  // A reader is a full Mutex (auto-extension, loss, release), so the run
  // holds it as it holds a mutex. Its RWMutex's writer is never used: an
  // exclusive run is a Mutex of the name, the same writer.
  RWMutex rw = rs.new_rw_mutex(cfg.name, std::move(options));
  return std::move(rw.reader());
}

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
// mislead a script that passes it to `redsync status --value`. A reader's
// value is its entry in the readers' set, reader_tag included, as `redsync
// status --value` compares it.
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
  if (!cfg_.semaphore()) return fmt::format("{}lock \"{}\"", cfg_.shared ? "shared " : "", cfg_.name);
  if (!permit_.id().empty())
    return fmt::format("permit (slot {}) of semaphore \"{}\"", permit_.slot(), cfg_.name);
  return fmt::format("a permit of semaphore \"{}\"", cfg_.name);
}

}  // namespace redsync::cli
