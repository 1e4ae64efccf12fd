#pragma once

// Joins owned loop threads that tore themselves down (a Redsync destroyed on
// its own loop thread cannot join that thread): a finished one when the
// next owned loop is made or handed over, the rest at process exit (which
// so waits for their releases, as a destructor off the loop thread would).

#include <atomic>
#include <memory>
#include <thread>

namespace redsync::detail::loop_reaper {

// Takes a loop thread that will set `finished` once it has freed its loop.
void adopt(std::thread t, std::shared_ptr<std::atomic<bool>> finished);

// Joins every adopted thread that has finished.
void reap_finished();

}  // namespace redsync::detail::loop_reaper
