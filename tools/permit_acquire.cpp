// Acquiring a permit for `redsync lock -n K NAME`: one acquire_async (or
// try_acquire_async for --wait 0) on the semaphore NAME of K permits,
// extended by the library's watchdog once granted. A semaphore has no
// waiting line, and no check attempts run beside the waiter (they would
// take a permit): while it waits, the tool says so every --report-every,
// and when it gives up it says why from the last attempt's per-node detail.

#include "acquire_failure.hpp"
#include "exit_status.hpp"
#include "lock_run.hpp"

#include <fmt/format.h>

#include <stop_token>

namespace redsync::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

}  // namespace

int lock_run::acquire_permit() {
  semaphore_.emplace(
      rs_.new_semaphore(cfg_.name, *cfg_.permits, holding_options<semaphore_options>(cfg_, ev_)));
  std::stop_source stop;
  const auto started = steady_clock::now();
  const bool one_try = cfg_.one_try();
  const context ctx = acquisition_context(cfg_, stop.get_token());
  auto done = deliver(ev_, &loop_events::permit_acquired);
  if (one_try) {
    semaphore_->try_acquire_async(ctx, std::move(done));
  } else {
    semaphore_->acquire_async(ctx, std::move(done));
  }

  const bool reporting = cfg_.report_every.count() > 0 && !cfg_.quiet() && !one_try;
  auto next_report = started + cfg_.report_every;
  int interrupted_by = 0;
  std::optional<acquire_result> a;
  while (!a) {
    std::optional<milliseconds> timeout;
    if (reporting && interrupted_by == 0)
      timeout = std::max(milliseconds{0}, std::chrono::ceil<milliseconds>(next_report - steady_clock::now()));
    if (await_acquisition(timeout, interrupted_by, stop)) {
      std::lock_guard lk(ev_->mu);
      if (ev_->permit_acquired) a = std::exchange(ev_->permit_acquired, std::nullopt);
    }
    if (!a && reporting && interrupted_by == 0 && steady_clock::now() >= next_report) {
      print_err(fmt::format(
          "waiting for a permit of semaphore \"{}\" ({} permits, {:.1f} s so far); `redsync status {}` shows "
          "who holds them",
          cfg_.name, *cfg_.permits, std::chrono::duration<double>(steady_clock::now() - started).count(),
          cfg_.name));
      next_report = steady_clock::now() + cfg_.report_every;
    }
  }

  if (interrupted_by != 0) {
    // Granted just as the signal came: the permit's destructor would
    // release it too, but say so in -v.
    if (a->ok()) {
      permit_ = std::move(a->permit);
      release();
    }
    return exit_status::signal_base + interrupted_by;
  }
  if (a->ok()) {
    permit_ = std::move(a->permit);
    if (cfg_.verbose()) {
      print_err(fmt::format("acquired {} (id {}, {} permits, fencing token {}): {}", what(), permit_.id(),
                            *cfg_.permits, permit_.token().value, a->describe()));
    } else if (const std::string never = never_voting(a->outcome); !never.empty() && !cfg_.quiet()) {
      print_err(fmt::format("acquired {}, but {}", what(), never));
    }
    return -1;
  }
  const result& r = a->outcome;
  if (r.error == errc::permits_mismatch) {
    print_err(fmt::format("cannot acquire a permit of semaphore \"{}\" with -n {}: {}", cfg_.name,
                          *cfg_.permits, r.reason));
    return exit_status::usage;
  }
  const acquire_verdict v =
      judge_acquisition(r, {.quorum = semaphore_->quorum(), .held_as = "every permit held by others"});
  if (v.hopeless || !cfg_.quiet()) {
    std::string within;
    if (cfg_.wait) {
      within = one_try ? " in one try (--wait 0)" : fmt::format(" within --wait {} ms", cfg_.wait->count());
    } else if (cfg_.tries) {
      within = fmt::format(" in {} tries", *cfg_.tries);
    }
    std::string line = fmt::format("could not acquire a permit of semaphore \"{}\" ({} permits){}: {}",
                                   cfg_.name, *cfg_.permits, within, v.why);
    if (v.hopeless) line += "; that leaves no quorum, and retrying cannot fix it";
    if (cfg_.verbose()) line += fmt::format(" [{}]", r.describe());
    print_err(line);
  }
  return v.status;
}

}  // namespace redsync::cli
