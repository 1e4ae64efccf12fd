// A job longer than the lock's expiry, kept safe by auto-extension.
//
// With auto_extend the library extends the lock in the background while it is
// held. If it ever cannot (nodes down, a cap reached), the lock is *lost*:
// on_lost runs once on the library's loop thread and lost_token() is stopped.
// The work loop polls that token and stops before it does harm unprotected.
//
//   build/examples/auto_extend [redis://127.0.0.1:7001 ...]
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <chrono>
#include <exception>
#include <thread>

#include "nodes.hpp"

using namespace std::chrono_literals;
using std::chrono::steady_clock;

namespace {

long long ms(steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

enum class outcome { not_acquired, finished, lost };

// Runs `job_length` worth of 50 ms work slices under `mutex`.
outcome run_job(redsync::Mutex& mutex, const char* label, steady_clock::duration job_length) {
  if (auto r = mutex.lock(redsync::context::timeout(5s)); !r) {
    fmt::print(stderr, "{}: lock failed: {}\n", label, r.describe());
    if (examples::nodes_unreachable(r)) fmt::print(stderr, "({})\n", examples::unreachable_hint);
    return outcome::not_acquired;
  }
  const auto start = steady_clock::now();
  fmt::print("{}: acquired, valid for {} ms; the job needs {} ms\n", label, ms(mutex.until() - start),
             ms(job_length));

  const std::stop_token lost = mutex.lost_token();
  auto until = mutex.until();
  int extensions = 0;
  while (steady_clock::now() - start < job_length) {
    if (lost.stop_requested()) {
      fmt::print("{}: lock lost after {} ms: stopping the job unfinished\n", label,
                 ms(steady_clock::now() - start));
      break;
    }
    std::this_thread::sleep_for(50ms);  // one slice of real work
    // until() moves forward each time the watchdog extends the lock.
    if (auto now_until = mutex.until(); now_until != until) {
      until = now_until;
      fmt::print("{}: extension {} at +{} ms, valid until +{} ms\n", label, ++extensions,
                 ms(steady_clock::now() - start), ms(until - start));
    }
  }
  if (!lost.stop_requested())
    fmt::print("{}: job done after {} ms\n", label, ms(steady_clock::now() - start));

  // After a loss the release reports why (the key expired); that is expected.
  auto r = mutex.unlock(redsync::context::timeout(2s));
  fmt::print("{}: unlock -> {}\n", label, r ? std::string("ok") : r.describe());
  return lost.stop_requested() ? outcome::lost : outcome::finished;
}

}  // namespace

constexpr std::string_view usage =
    "Usage: auto_extend [--help] [URI...]\n\n"
    "A job longer than the lock's expiry, kept safe by auto-extension: the\nlibrary extends the lock while "
    "it is held, and stops the job if it is lost.\n";

int main(int argc, char** argv) try {
  redsync::Redsync rs(examples::node_uris(argc, argv, usage));

  // on_lost runs on the library's loop thread and must not block.
  auto on_lost = [](const redsync::result& why) { fmt::print("  on_lost: {}\n", why.describe()); };

  // Job 1: 2 s of work under a 600 ms expiry. The watchdog extends every
  // expiry/3 = 200 ms, so the lock outlives the job.
  auto job1 = rs.new_mutex("example:auto_extend",
                           {.expiry = 600ms, .tries = 50, .auto_extend = true, .on_lost = on_lost});
  const outcome first = run_job(job1, "job 1", 2s);
  if (first == outcome::not_acquired) return 1;

  // Job 2: the same, but the watchdog may extend only twice: the lock runs
  // out well before the job ends, on_lost fires, and the job stops.
  auto job2 = rs.new_mutex(
      "example:auto_extend",
      {.expiry = 600ms, .tries = 50, .auto_extend = true, .max_extensions = 2, .on_lost = on_lost});
  const outcome second = run_job(job2, "job 2", 2s);
  if (second == outcome::not_acquired) return 1;

  // Anything else than "finished, then lost" means the example misbehaved.
  return first == outcome::finished && second == outcome::lost ? 0 : 1;
} catch (const std::exception& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
