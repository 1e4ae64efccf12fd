// Acquiring for `redsync lock`, without ever waiting in silence.
//
// The waiter is one lock_async (or try_lock_async for --wait 0) on main_:
// one call for the whole wait keeps its place in the name's fair waiting
// line and is woken by the releases. The library reports per-node detail
// only when a call ends, so while the waiter waits, a second holder of the
// same name (checker_) makes a check attempt every second: one try_lock,
// which reads what stands in the way on every node (another holder,
// unreachable nodes, nodes the restart guard keeps out, refusals, error
// replies). From those the tool
//   - reports on stderr why it is still waiting, after a short while and
//     then every --report-every (unless -q);
//   - gives up when two checks in a row find refusals (NOAUTH, WRONGPASS,
//     NOPERM) or error replies that retrying cannot fix on more nodes than
//     a quorum can spare: no wait can end well then.
// A check attempt is an ordinary try_lock: it does not queue, and the
// waiting line refuses it while another waiter (our own waiter included) is
// ahead of it; should it win nonetheless (no one in line, the lock free),
// the tool keeps that acquisition and cancels the waiter. (A library hook
// that reported each failed attempt of a call in flight would make the
// check attempts unnecessary.)
//
// With --shared, both are readers of the name (lock_held.cpp: new_holder),
// and a check attempt is a reader's try_lock: refused while a writer holds
// the name or waits ahead in its line. Where nodes refused because of the
// other side of the read-write lock, the reports say so (rw_refusal.hpp);
// the library's refusal does not tell them from another writer.

#include "acquire_failure.hpp"
#include "args.hpp"
#include "exit_status.hpp"
#include "lock_run.hpp"
#include "node_list.hpp"
#include "rw_refusal.hpp"
#include "tls_failure.hpp"
#include "tls_link.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stop_token>

namespace redsync::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

// How often the waiter is checked on, and when it is first reported.
constexpr milliseconds check_interval = 1s;
constexpr milliseconds first_report = 2s;
// Checks in a row that must find the wait hopeless before the tool gives up:
// one error reply does not make a node broken.
constexpr int hopeless_checks = 2;
// How long the refusing nodes' keys may take to read when a report says
// why: a report is worth a short delay, not a long one.
constexpr milliseconds refusal_read_timeout = 500ms;

}  // namespace

int lock_run::acquire() {
  std::stop_source stop;
  const auto started = steady_clock::now();
  const bool one_try = cfg_.one_try();
  const context ctx = acquisition_context(cfg_, stop.get_token());
  auto done = deliver(ev_, &loop_events::acquired);
  if (one_try) {
    main_.try_lock_async(ctx, std::move(done));
  } else {
    main_.lock_async(ctx, std::move(done));
  }

  const milliseconds every =
      cfg_.report_every.count() > 0 ? std::min(check_interval, cfg_.report_every) : check_interval;
  auto next_check = started + every;
  auto next_report =
      started + (cfg_.report_every.count() > 0 ? std::min(first_report, cfg_.report_every) : first_report);
  bool checking = false;  // a check attempt is in flight
  int hopeless_in_a_row = 0;
  std::optional<acquire_verdict> gave_up;
  std::optional<result> last_check;
  int interrupted_by = 0;
  std::optional<result> r;
  // Whether the waiter still waits, and so may be checked on and reported.
  const auto waiting = [&] { return !one_try && !r && interrupted_by == 0 && !gave_up && !checker_won_; };
  while (!r || checking) {
    std::optional<milliseconds> timeout;
    if (waiting() && !checking) {
      timeout = std::max(milliseconds{0}, std::chrono::ceil<milliseconds>(next_check - steady_clock::now()));
    }
    std::optional<result> check;
    if (await_acquisition(timeout, interrupted_by, stop)) {
      std::lock_guard lk(ev_->mu);
      if (ev_->acquired) r = std::exchange(ev_->acquired, std::nullopt);
      if (ev_->checked) check = std::exchange(ev_->checked, std::nullopt);
    }
    // The waiter is done: a check still in flight is not needed any more.
    if (r && checking) stop.request_stop();
    if (check) {
      checking = false;
      if (*check) {
        // The check attempt took the lock: keep it, stop the waiter.
        checker_won_ = true;
        stop.request_stop();
      } else if (waiting()) {
        explain_tls_ports(*check);
        const acquire_verdict v = judge_acquisition(*check);
        hopeless_in_a_row = v.hopeless ? hopeless_in_a_row + 1 : 0;
        if (hopeless_in_a_row >= hopeless_checks) {
          gave_up = v;
          stop.request_stop();
        } else if (cfg_.report_every.count() > 0 && !cfg_.quiet() && steady_clock::now() >= next_report) {
          report_waiting(*check, steady_clock::now() - started);
          next_report = steady_clock::now() + cfg_.report_every;
        }
        last_check = std::move(check);
      }
    }
    if (waiting() && !checking && steady_clock::now() >= next_check) {
      checking = true;
      next_check = steady_clock::now() + every;
      checker_.try_lock_async(context{}.with(stop.get_token()), deliver(ev_, &loop_events::checked));
    }
  }

  // Shared holds do not exclude each other: with --shared the waiter and a
  // check attempt may both have been granted (a release that hands the name
  // to the waiter opens it to every reader). Keep the check's, as held()
  // does, and let the waiter's go: held and extended beside it, it would
  // outlive the run's release, and its loss would read as the run's.
  if (checker_won_ && r && *r) (void)main_.unlock(context{});
  const bool acquired = checker_won_ || *r;
  if (interrupted_by != 0) {
    if (acquired) release();
    return exit_status::signal_base + interrupted_by;
  }
  if (acquired) {
    const result& got = checker_won_ ? held().last_result() : *r;
    if (cfg_.verbose()) {
      print_err(
          fmt::format("acquired {} (fencing token {}): {}", what(), held().token().value, got.describe()));
    } else if (const std::string never = never_voting(got); !never.empty() && !cfg_.quiet()) {
      // Granted, but the node list is wrong: say so without -v.
      print_err(fmt::format("acquired {}, but {}", what(), never));
    }
    return -1;
  }
  if (gave_up) return report_failure(*last_check, *gave_up);
  explain_tls_ports(*r);
  // An attempt answered by no node says nothing; the last check may.
  if (r->nodes.empty() && last_check) {
    result detail = *last_check;
    detail.error = r->error;
    explain_refusals(detail);
    return report_failure(detail, judge_acquisition(detail));
  }
  explain_refusals(*r);
  return report_failure(*r, judge_acquisition(*r));
}

void lock_run::explain_refusals(result& r) const {
  // Nobody to read about with -q: the refusal is not reported.
  if (cfg_.quiet()) return;
  explain_rw_refusals(r, cfg_.nodes, cfg_.name, cfg_.shared, refusal_read_timeout);
}

bool lock_run::await_acquisition(std::optional<milliseconds> timeout, int& interrupted_by,
                                 std::stop_source& stop) {
  const readiness ready = wait_readable(signals_.fd(), ev_->wake.fd(), timeout);
  if (ready.a) {
    while (auto s = signals_.read()) {
      if (role_of(s->number) != signal_role::forward_or_interrupt || interrupted_by != 0) continue;
      interrupted_by = s->number;
      stop.request_stop();
    }
  }
  if (ready.b) ev_->wake.drain();
  return ready.b;
}

void lock_run::explain_tls_ports(result& r) {
  tls_port_.resize(cfg_.nodes.size());
  for (std::size_t i = 0; i < r.nodes.size() && i < cfg_.nodes.size(); ++i) {
    node_result& n = r.nodes[i];
    if (n.status != node_status::unreachable || !may_be_tls_port(n.message)) continue;
    if (is_cluster_member_uri(cfg_.nodes[i])) continue;
    const node_options node = node_options::parse(cfg_.nodes[i]);
    if (node.tls.enabled) continue;
    if (!tls_port_[i]) tls_port_[i] = speaks_tls(node, 1s);
    if (*tls_port_[i]) n.message = plaintext_to_tls(node, n.message);
  }
}

void lock_run::report_waiting(result check, std::chrono::steady_clock::duration waited) const {
  explain_refusals(check);
  const acquire_verdict v = judge_acquisition(check);
  std::string line = fmt::format("waiting for {} ({} s so far): {}", what(),
                                 std::chrono::duration_cast<std::chrono::seconds>(waited).count(), v.why);
  if (v.status == exit_status::not_acquired)
    line += fmt::format("; `redsync status {}` shows who", cfg_.name);
  if (cfg_.verbosity >= 2) line += fmt::format(" [last check: {}]", check.describe());
  print_err(line);
}

int lock_run::report_failure(const result& r, const acquire_verdict& v) const {
  // Refusals and broken nodes are errors, reported even with -q; busy and
  // unreachable nodes are the ordinary failures -q silences.
  if (v.hopeless || !cfg_.quiet()) {
    std::string line;
    if (v.hopeless) {
      line = fmt::format("cannot acquire {}: {}; that leaves no quorum, and retrying cannot fix it", what(),
                         v.why);
    } else {
      std::string within;
      if (cfg_.wait) {
        within = cfg_.wait->count() == 0 ? " in one try (--wait 0)"
                                         : fmt::format(" within --wait {} ms", cfg_.wait->count());
      } else if (cfg_.tries) {
        within = fmt::format(" in {} tries", *cfg_.tries);
      }
      line = fmt::format("could not acquire {}{}: {}", what(), within, v.why);
    }
    if (cfg_.verbose()) line += fmt::format(" [{}]", r.describe());
    print_err(line);
  }
  return v.status;
}

}  // namespace redsync::cli
