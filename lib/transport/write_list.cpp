// One loop's connections with commands to write (write_list.hpp).

#include "transport/write_list.hpp"

#include "transport/connection.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace redsync::detail {

namespace {

// Loop -> its list. Looked up when a connection is made, from the thread
// that makes it; never destroyed (a list may be released during exit).
struct registry {
  std::mutex mutex;
  std::unordered_map<uv_loop_s*, std::weak_ptr<write_list>> lists;
};

registry& lists() {
  static auto* r = new registry;
  return *r;
}

}  // namespace

std::shared_ptr<write_list> write_list::create(uv_loop_s* loop) {
  auto list = std::make_shared<write_list>(loop);
  std::lock_guard lock(lists().mutex);
  lists().lists[loop] = list;
  return list;
}

std::shared_ptr<write_list> write_list::find(uv_loop_s* loop) {
  std::lock_guard lock(lists().mutex);
  const auto it = lists().lists.find(loop);
  return it == lists().lists.end() ? nullptr : it->second.lock();
}

write_list::~write_list() {
  std::lock_guard lock(lists().mutex);
  const auto it = lists().lists.find(loop_);
  // A newer list may have replaced this one for the same loop.
  if (it != lists().lists.end() && it->second.expired()) lists().lists.erase(it);
}

void write_list::remove(connection* c) {
  std::erase(items_, c);
}

void write_list::write_all() {
  if (items_.empty()) return;
  std::vector<connection*> batch;
  batch.swap(spare_);
  batch.swap(items_);
  for (connection* c : batch) c->write_if_listed();
  batch.clear();
  if (spare_.capacity() < batch.capacity()) spare_.swap(batch);
}

}  // namespace redsync::detail
