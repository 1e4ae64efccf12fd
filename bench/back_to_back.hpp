#pragma once

// `total` operations back to back, each started by the completion of the one
// before (on the thread that completes it: the loop thread in the benchmarks
// that use it, floor and ladder); the last `measured` are timed.

#include "stats.hpp"

#include <chrono>
#include <future>
#include <utility>

namespace bench {

template <class Start>
struct back_to_back {
  // start(done) starts one operation, which calls done(ok) once when it completes.
  Start start;
  int total;
  int measured;
  samples out{};
  int failures = 0;
  std::promise<void> finished{};

  void next(int i) {
    if (i == total) return finished.set_value();
    const auto t0 = std::chrono::steady_clock::now();
    start([this, i, t0](bool ok) {
      if (i >= total - measured) out.add(std::chrono::steady_clock::now() - t0);
      if (!ok) ++failures;
      next(i + 1);
    });
  }
};

template <class Start>
back_to_back<Start> back_to_back_run(Start start, int total, int measured) {
  return {std::move(start), total, measured};
}

}  // namespace bench
