#pragma once

// Which slot a permit's next attempt asks for, from the last attempt's
// answers: per node, the slots of the other live permits, and whether a
// permit was free for us there (semaphore_scripts.hpp, rules S and F).
// Pure: no I/O, the randomness from the caller.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace redsync::detail {

struct slot_answers {
  std::vector<std::vector<std::uint32_t>> others;  // per node: the other permits' slots
  std::vector<bool> open;                          // per node: a permit was free for us there
};

// The slot the fewest nodes said is taken (ties at random).
std::uint32_t least_taken_slot(const slot_answers& a, std::uint32_t k, std::mt19937_64& rng);

// A slot other than `tried` that `quorum` nodes could grant: a permit is
// free for us there and no other permit has the slot (ties at random).
std::optional<std::uint32_t> open_slot(const slot_answers& a, std::uint32_t k, std::uint32_t tried,
                                       std::size_t quorum, std::mt19937_64& rng);

}  // namespace redsync::detail
