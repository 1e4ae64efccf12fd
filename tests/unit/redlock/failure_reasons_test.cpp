// Why an acquisition's attempt failed (lib/redlock/mutex/failure_reasons.hpp),
// from made-up tallies: kind_clash exactly when the refusals because the name
// is held as the other kind ruled out a quorum on their own.

#include "redlock/mutex/failure_reasons.hpp"
#include "redlock/quorum.hpp"

#include <doctest/doctest.h>

#include <string>

using redsync::errc;
using namespace redsync::detail;

TEST_CASE(
    "kind_clash only when the other kind's refusals alone leave no quorum; busy or no_quorum otherwise") {
  // Every split of n nodes into other-kind refusals, busy refusals and
  // unreachable ones (no yes: the attempt failed).
  for (std::size_t n = 1; n <= 5; ++n) {
    for (const std::size_t q : {quorum(n), n}) {  // a mutex's majority; a semaphore's may be larger
      for (std::size_t other = 0; other <= n; ++other) {
        for (std::size_t busy = 0; other + busy <= n; ++busy) {
          CAPTURE(n);
          CAPTURE(q);
          CAPTURE(other);
          CAPTURE(busy);
          tally t;
          t.nodes.resize(n);
          t.other_kind = other;
          t.taken = other + busy;
          t.failed = n - other - busy;
          const errc e = acquire_failure(t, n, q);
          if (other > n - q) {
            CHECK(e == errc::kind_clash);
          } else if (t.taken > 0 && t.failed <= n - q) {
            CHECK(e == errc::busy);
          } else {
            CHECK(e == errc::no_quorum);
          }
        }
      }
    }
  }
}

TEST_CASE("a quorum of yes is never a kind_clash, even with other-kind refusals beside it") {
  tally t;
  t.nodes.resize(5);
  t.ok = 3;
  t.taken = 2;
  t.other_kind = 2;
  CHECK(acquire_failure(t, 5, 3) == errc::validity_elapsed);
}

TEST_CASE("kind_clash has its name and a message that says which kinds") {
  CHECK(redsync::to_string(errc::kind_clash) == "kind_clash");
  const std::string message = redsync::make_error_code(errc::kind_clash).message();
  CHECK(message.find("other kind") != std::string::npos);
  CHECK(message.find("mutex or semaphore") != std::string::npos);
}
