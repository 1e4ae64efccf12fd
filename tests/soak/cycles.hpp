// Soak: hands out the cycles to the lockers, and tells the coordinator when
// to sample, when the warm-up is over and when every cycle has ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace redsync::soak {

class cycle_gate {
 public:
  using clock = std::chrono::steady_clock;

  /// `total` cycles; a sample is due at every multiple of `sample_every`; the
  /// gate closes once cycle `warmup - 1` was handed out (see baseline_due).
  cycle_gate(std::uint64_t total, std::uint64_t warmup, std::uint64_t sample_every)
      : total_(total), warmup_(warmup), sample_every_(sample_every) {}

  /// Blocking lockers: the next cycle's index, waiting while the gate is
  /// closed; false once every cycle has been handed out.
  bool claim(std::uint64_t& index) {
    std::unique_lock lock(mutex_);
    lockers_cv_.wait(lock, [&] { return !closed_ || next_ >= total_; });
    if (next_ >= total_) return false;
    hand_out(index);
    return true;
  }

  enum class claimed { yes, parked, done };
  /// Loop-thread lockers, which must not wait: while the gate is closed the
  /// locker is parked, and `resume` is called (from the thread that opens
  /// the gate) when it opens.
  claimed try_claim(std::uint64_t& index, std::function<void()> resume) {
    std::lock_guard lock(mutex_);
    if (next_ >= total_) return claimed::done;
    if (closed_) {
      parked_.push_back(std::move(resume));
      return claimed::parked;
    }
    hand_out(index);
    return claimed::yes;
  }

  /// A handed-out cycle has ended.
  void finish() {
    std::lock_guard lock(mutex_);
    if (--in_flight_ == 0) coordinator_cv_.notify_all();
  }

  /// What the coordinator has to do.
  struct events {
    std::vector<std::uint64_t> samples;  ///< cycle indices at which a sample is due
    bool baseline_due = false;           ///< the warm-up ended; the gate is closed
    bool all_done = false;               ///< every cycle has been handed out and has ended
  };
  /// Waits until there is something to do, or until `until`.
  events wait(clock::time_point until) {
    std::unique_lock lock(mutex_);
    coordinator_cv_.wait_until(lock, until, [&] { return !samples_.empty() || baseline_due_ || done(); });
    events e;
    e.samples.swap(samples_);
    e.baseline_due = baseline_due_;
    baseline_due_ = false;
    e.all_done = done();
    return e;
  }

  /// Waits until no handed-out cycle is still running (the gate closed).
  void wait_quiet() {
    std::unique_lock lock(mutex_);
    coordinator_cv_.wait(lock, [&] { return in_flight_ == 0; });
  }

  /// Opens the gate and resumes the parked lockers.
  void open() {
    std::vector<std::function<void()>> resume;
    {
      std::lock_guard lock(mutex_);
      closed_ = false;
      resume.swap(parked_);
    }
    lockers_cv_.notify_all();
    for (auto& fn : resume) fn();
  }

 private:
  void hand_out(std::uint64_t& index) {
    index = next_++;
    ++in_flight_;
    if (index > 0 && index % sample_every_ == 0) {
      samples_.push_back(index);
      coordinator_cv_.notify_all();
    }
    if (index + 1 == warmup_) {
      closed_ = true;
      baseline_due_ = true;
      coordinator_cv_.notify_all();
    }
  }
  bool done() const { return next_ >= total_ && in_flight_ == 0; }

  const std::uint64_t total_;
  const std::uint64_t warmup_;
  const std::uint64_t sample_every_;
  std::mutex mutex_;
  std::condition_variable lockers_cv_;
  std::condition_variable coordinator_cv_;
  std::uint64_t next_ = 0;
  std::uint64_t in_flight_ = 0;
  bool closed_ = false;
  bool baseline_due_ = false;
  std::vector<std::uint64_t> samples_;
  std::vector<std::function<void()>> parked_;
};

}  // namespace redsync::soak
