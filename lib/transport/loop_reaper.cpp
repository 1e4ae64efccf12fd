// The joiner of loop threads that ended on their own (loop_reaper.hpp).

#include "transport/loop_reaper.hpp"

#include <cstdlib>
#include <mutex>
#include <vector>

namespace redsync::detail::loop_reaper {

namespace {

struct entry {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> finished;
};

struct state {
  std::mutex mutex;
  std::vector<entry> threads;
};

// Never destroyed: the atexit handler may still need it.
state& get() {
  static state* s = new state;
  return *s;
}

void join_all() {
  std::vector<entry> all;
  {
    std::lock_guard lock(get().mutex);
    all.swap(get().threads);
  }
  for (auto& e : all) {
    // exit() called on such a loop thread itself cannot wait for it.
    if (e.thread.get_id() == std::this_thread::get_id())
      e.thread.detach();
    else
      e.thread.join();
  }
}

}  // namespace

void adopt(std::thread t, std::shared_ptr<std::atomic<bool>> finished) {
  reap_finished();
  static const bool registered = (std::atexit(&join_all), true);
  (void)registered;
  std::lock_guard lock(get().mutex);
  get().threads.push_back({std::move(t), std::move(finished)});
}

void reap_finished() {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(get().mutex);
    auto& ts = get().threads;
    for (auto it = ts.begin(); it != ts.end();) {
      if (it->finished->load(std::memory_order_acquire)) {
        done.push_back(std::move(it->thread));
        it = ts.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : done) t.join();  // the thread has returned or is about to
}

}  // namespace redsync::detail::loop_reaper
