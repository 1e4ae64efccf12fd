// The most holders at once among intervals [enter, leave) on one clock:
// shared by the semaphore contention test and the bench's semaphore
// section, which check the same bound (at most k).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace redsync::contention {

// `Held` has `enter` and `leave` (ns).
template <class Held>
std::size_t most_at_once(const std::vector<Held>& held) {
  std::vector<std::pair<std::int64_t, int>> edges;
  for (const auto& h : held) {
    edges.emplace_back(h.enter, 1);
    edges.emplace_back(h.leave, -1);
  }
  std::sort(edges.begin(), edges.end());  // a leave sorts before an enter at the same instant
  std::size_t now = 0, most = 0;
  for (const auto& [t, d] : edges) {
    now = d > 0 ? now + 1 : now - 1;
    most = std::max(most, now);
  }
  return most;
}

}  // namespace redsync::contention
