// Test helper: the handshake of the tests that let go of a lock or a permit
// in its own callback while its Redsync is being destroyed on the test's
// thread (lifetime_callback_test, holder_lifetime_test,
// semaphore_attack_test).
#pragma once

#include <chrono>
#include <future>
#include <thread>

namespace redsync::test {

/// The callback reports its outcome, then waits until the test's thread has
/// begun destroying the Redsync, and 300 ms more, so that the destruction is
/// under way (its shutdown queued behind the callback) when the callback lets go.
class drop_at_shutdown {
 public:
  /// In the callback: reports `ok` to the test's thread, then waits as above.
  void report_then_wait(bool ok) {
    got_.set_value(ok);
    destroying_f_.wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  /// On the test's thread: waits for the callback's report and returns it.
  bool reported() { return got_f_.get(); }
  /// On the test's thread, just before the Redsync is destroyed: lets the callback go on.
  void destroying() { destroying_.set_value(); }

 private:
  std::promise<void> destroying_;
  std::future<void> destroying_f_ = destroying_.get_future();
  std::promise<bool> got_;
  std::future<bool> got_f_ = got_.get_future();
};

}  // namespace redsync::test
