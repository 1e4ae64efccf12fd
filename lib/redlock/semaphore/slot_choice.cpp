// Which slot a permit's next attempt asks for.

#include "redlock/semaphore/slot_choice.hpp"

#include <algorithm>

namespace redsync::detail {

namespace {

std::uint32_t pick(const std::vector<std::uint32_t>& best, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> d(0, best.size() - 1);
  return best[d(rng)];
}

}  // namespace

std::uint32_t least_taken_slot(const slot_answers& a, std::uint32_t k, std::mt19937_64& rng) {
  std::vector<std::size_t> taken(k, 0);
  for (const auto& listed : a.others)
    for (const std::uint32_t s : listed)
      if (s < k) ++taken[s];
  const std::size_t least = *std::min_element(taken.begin(), taken.end());
  std::vector<std::uint32_t> best;
  for (std::uint32_t s = 0; s < k; ++s)
    if (taken[s] == least) best.push_back(s);
  return pick(best, rng);
}

std::optional<std::uint32_t> open_slot(const slot_answers& a, std::uint32_t k, std::uint32_t tried,
                                       std::size_t quorum, std::mt19937_64& rng) {
  std::vector<std::size_t> could(k, 0);
  for (std::size_t i = 0; i < a.others.size(); ++i) {
    if (!a.open[i] || a.others[i].size() >= k) continue;
    std::vector<bool> taken(k, false);
    for (const std::uint32_t s : a.others[i])
      if (s < k) taken[s] = true;
    for (std::uint32_t s = 0; s < k; ++s)
      if (!taken[s]) ++could[s];
  }
  std::vector<std::uint32_t> best;
  for (std::uint32_t s = 0; s < k; ++s)
    if (s != tried && could[s] >= quorum) best.push_back(s);
  if (best.empty()) return std::nullopt;
  return pick(best, rng);
}

}  // namespace redsync::detail
