#include "redlock/semaphore/semaphore_quorum.hpp"

#include <redsync/error.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>

using redsync::config_error;
using redsync::detail::checked_semaphore_quorum;
using redsync::detail::max_holders;
using redsync::detail::max_permits;
using redsync::detail::semaphore_quorum;

namespace {

// The message of the config_error `f` throws, or "" if it throws none.
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the semaphore quorum is the least q with q > k*N/(k+1)") {
  for (std::size_t n = 1; n <= 12; ++n) {
    for (std::size_t k = 1; k <= 20; ++k) {
      CAPTURE(n);
      CAPTURE(k);
      const std::size_t q = semaphore_quorum(n, k);
      CHECK(q >= 1);
      CHECK(q <= n);
      // Safe: at most k holders.
      CHECK((k + 1) * q > k * n);
      CHECK(max_holders(n, k, q) <= k);
      // Least: one node fewer would allow k+1 holders (when there is one fewer).
      if (q > 1) CHECK(max_holders(n, k, q - 1) > k);
    }
  }
}

TEST_CASE("with one permit the semaphore quorum is the mutex's majority") {
  for (std::size_t n = 1; n <= 12; ++n) {
    CAPTURE(n);
    CHECK(semaphore_quorum(n, 1) == n / 2 + 1);
  }
}

TEST_CASE("the issue's examples: N=5 k=2 needs 4 nodes, k >= N-1 needs all N") {
  CHECK(semaphore_quorum(5, 2) == 4);
  for (std::size_t n = 2; n <= 9; ++n) {
    CAPTURE(n);
    for (std::size_t k = n - 1; k <= n + 3; ++k) CHECK(semaphore_quorum(n, k) == n);
  }
  static_assert(semaphore_quorum(5, 2) == 4);
}

TEST_CASE("N=3 k=2: a majority of 2 allows 3 holders and is refused, 3 is required") {
  // {1,2}, {2,3}, {1,3}: every node grants exactly 2 permits, 3 holders.
  CHECK(max_holders(3, 2, 2) == 3);
  CHECK(semaphore_quorum(3, 2) == 3);
  CHECK(max_holders(3, 2, 3) == 2);
  const std::string why = refusal([] { checked_semaphore_quorum(3, 2, 2); });
  CHECK(why.find("semaphore_options.quorum = 2") != std::string::npos);
  CHECK(why.find("up to 3 holders") != std::string::npos);
  CHECK(why.find("at least 3") != std::string::npos);
  CHECK(checked_semaphore_quorum(3, 2, 3) == 3);
}

TEST_CASE("a quorum of 0 means the bound, and a larger one up to N is accepted") {
  CHECK(checked_semaphore_quorum(5, 2, 0) == 4);
  CHECK(checked_semaphore_quorum(5, 2, 5) == 5);
  const std::string why = refusal([] { checked_semaphore_quorum(5, 2, 6); });
  CHECK(why.find("semaphore_options.quorum = 6") != std::string::npos);
  CHECK(why.find("5 nodes") != std::string::npos);
}

TEST_CASE("permits outside 1..max_permits are refused, naming the value and the range") {
  for (const int bad : {0, -1, max_permits + 1}) {
    CAPTURE(bad);
    const std::string why = refusal([bad] { checked_semaphore_quorum(3, bad, 0); });
    CHECK(why.find("permits = " + std::to_string(bad)) != std::string::npos);
    CHECK(why.find("1.." + std::to_string(max_permits)) != std::string::npos);
  }
  CHECK(checked_semaphore_quorum(3, max_permits, 0) == 3);
}
