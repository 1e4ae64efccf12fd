// `redsync lock NAME -- COMMAND...`: acquire (lock_acquire.cpp), run the
// command while the library's watchdog keeps the lock extended, release, and
// exit with the command's status. Without a command (hold mode), print the
// lock's value and token, hold it until a signal, release it.
//
// The process group: the command runs in its own group, led by a supervisor
// process (supervisor.hpp), so that a lost lock, the command's exit and the
// tool's death can each end everything the command started, not just the
// command: a command's background processes must not keep working on a
// resource after the tool reported the loss or released the lock. The tool
// hands the supervisor every new validity end of the lock, and the
// supervisor ends the group before the last one it got: a stopped or stuck
// tool, which extends nothing and reports nothing, cannot leave the command
// running without the lock (deadline.hpp).
//
// Signals: every signal in role_of() is read from a signalfd, whether a
// process or the terminal sent it, and forwarded to the command's group (or
// ignored; see wakeups.hpp). Nothing is delivered twice, since the command is
// no longer in the tool's group.
//
// The terminal: a command in a background group that reads the terminal gets
// SIGTTIN and stops. So when stdin is a terminal and the tool is in its
// foreground group (run from an interactive shell), the command's group
// becomes the foreground group for as long as it lives: it can read the
// terminal, and Ctrl-C, Ctrl-\ and resizes reach it directly, as with any
// command; the tool then never sees them. Otherwise (cron, systemd, pipes,
// `&`) the group stays in the background and the tool forwards whatever it
// gets. Job control is not supported: Ctrl-Z would leave the lock held by a
// stopped command, so the supervisor resumes a command stopped by SIGTSTP and
// the tool ignores SIGTSTP itself.

#include "commands.hpp"
#include "exit_status.hpp"
#include "help.hpp"
#include "holder_value.hpp"
#include "lock_run.hpp"

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <stop_token>

namespace redsync::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// Run from an interactive shell: stdin is a terminal whose foreground
// process group is the tool's.
bool in_terminal_foreground() {
  return ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
}

mutex_options make_mutex_options(const lock_config& cfg, const std::shared_ptr<loop_events>& ev) {
  auto mo = holding_options<mutex_options>(cfg, ev);
  mo.fail_fast = cfg.fail_fast;
  // Values that say who holds the lock, for `redsync status`.
  mo.value_generator = make_holder_value;
  return mo;
}

// `s` as a word the shell reads back as `s`: as is when it holds only
// characters no shell treats specially, else in single quotes.
std::string shell_word(std::string_view s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                       "0123456789%+,-./:=@_") == std::string_view::npos;
  if (plain) return std::string(s);
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

}  // namespace

std::function<void(const result&)> report_loss_to(std::shared_ptr<loop_events> ev) {
  return [ev = std::move(ev)](const result& r) {
    {
      std::lock_guard lk(ev->mu);
      if (!ev->lost_reason) ev->lost_reason = r.describe();
    }
    ev->wake.notify();
  };
}

void print_err(const std::string& line) {
  std::fputs(("redsync: " + line + "\n").c_str(), stderr);
  std::fflush(stderr);
}

lock_run::lock_run(const lock_config& cfg)
    : cfg_(cfg),
      margins_(margins_for(cfg.ttl, cfg.drift_factor.value_or(mutex_options{}.drift_factor), cfg.kill_grace)),
      ev_(std::make_shared<loop_events>()),
      rs_(cfg.nodes, redsync_options{.restart_guard = cfg.restart_guard, .script_mode = cfg.script_mode}),
      main_(new_holder(rs_, cfg, make_mutex_options(cfg, ev_))),
      checker_(new_holder(rs_, cfg, make_mutex_options(cfg, ev_))) {}

int lock_run::run() {
  if (int status = cfg_.semaphore() ? acquire_permit() : acquire(); status >= 0) return status;
  // Each acquisition has its own lost token; bump the eventfd when it stops.
  std::stop_callback on_lost_token(held_lost_token(), [ev = ev_] { ev->wake.notify(); });
  return cfg_.hold() ? hold() : run_command();
}

int lock_run::run_command() {
  auto environment = held_environment();
  environment.emplace_back("REDSYNC_NODES", join(cfg_.nodes, ","));
  auto [child, err] = child_process::spawn(cfg_.command, environment,
                                           spawn_options{.kill_grace = cfg_.kill_grace,
                                                         .valid_until = held_until(),
                                                         .margins = margins_,
                                                         .take_terminal = in_terminal_foreground()});
  if (!child) {
    print_err(fmt::format("cannot run \"{}\": {}", cfg_.command[0], std::strerror(err)));
    release();
    return err == ENOENT || err == ENOTDIR ? exit_status::not_found : exit_status::cannot_execute;
  }
  const bool lost = supervise(*child);
  if (child->enforced().acted()) report_enforced(child->enforced(), lost);
  if (lost || child->enforced().acted()) {
    // Clear our value from the nodes that still have it; the lock is gone,
    // or was about to go with the command still running.
    release();
    return exit_status::lost;
  }
  const int released = release_after_use();
  return released != exit_status::ok ? released : child->shell_status();
}

// Hold mode: the lock is the product. Print what a script needs to use it
// (as shell assignments it can source), keep it extended until a signal
// asks for the release, release it.
int lock_run::hold() {
  for (const auto& [variable, value] : held_environment()) fmt::print("{}={}\n", variable, shell_word(value));
  std::fflush(stdout);
  if (cfg_.verbose())
    print_err(fmt::format("holding {} until a signal (SIGINT, SIGTERM, SIGHUP, ...)", what()));
  for (;;) {
    const readiness ready = wait_readable(signals_.fd(), ev_->wake.fd(), std::nullopt);
    if (ready.a) {
      while (auto s = signals_.read()) {
        if (role_of(s->number) != signal_role::forward_or_interrupt) continue;
        if (cfg_.verbose()) {
          print_err(fmt::format("{}: releasing {}", signal_name(s->number), what()));
        }
        return release_after_use();
      }
    }
    if (ready.b) ev_->wake.drain();
    if (lost_now()) {
      print_err(fmt::format("{} lost while held: {}", what(), lost_reason()));
      release();
      return exit_status::lost;
    }
  }
}

// Waits for the child, forwarding signals, passing each new validity end
// on to the supervisor and reacting to a loss. Returns true if the lock was
// lost while the child ran. The library has no extension callback, so
// until() is read every margins_.poll (deadline.hpp counts with that).
bool lock_run::supervise(child_process& child) {
  bool lost = false;
  const milliseconds poll = std::chrono::ceil<milliseconds>(margins_.poll);
  while (!child.try_wait()) {
    const readiness ready = wait_readable(signals_.fd(), ev_->wake.fd(), poll);
    if (ready.a) {
      while (auto s = signals_.read()) {
        const signal_role role = role_of(s->number);
        if (role != signal_role::forward && role != signal_role::forward_or_interrupt) continue;
        child.signal(s->number);
        if (role == signal_role::forward_or_interrupt) report_forwarded(child, s->number);
      }
    }
    if (ready.b) ev_->wake.drain();
    if (lost || child.try_wait()) continue;
    // until() first: a value read before the loss was reported came from
    // an extension that counted (none made after the loss changes it).
    const steady_clock::time_point until = held_until();
    if (lost_now()) {
      lost = true;
      child.terminate_group();
      print_err(fmt::format("{} lost while running: {}; sent SIGTERM to the command's process group", what(),
                            lost_reason()));
    } else {
      child.extend_deadline(until);
    }
  }
  return lost;
}

// A signal forwarded to the command's group says nothing about what the
// command did with it. One that ignores it (as a command started in the
// background by a non-interactive shell ignores SIGINT and SIGQUIT) goes on
// running and keeps the lock held: say so, and how to end it.
void lock_run::report_forwarded(const child_process& child, int sig) const {
  if (!child.command_ignores(sig)) {
    if (cfg_.verbose())
      print_err(fmt::format("forwarded {} to the command's process group", signal_name(sig)));
    return;
  }
  if (cfg_.quiet()) return;
  std::string how = fmt::format("to end it, send SIGTERM to redsync (kill -TERM {})", ::getpid());
  if (sig == SIGTERM || child.command_ignores(SIGTERM)) {
    how = fmt::format("it ignores SIGTERM too: to end it, kill -KILL -{} (its process group)", child.group());
  }
  print_err(fmt::format(
      "forwarded {} to the command's process group, but the command (pid {}) ignores it, so it is still "
      "running and {} stays held until it exits; {}",
      signal_name(sig), child.command_pid(), what(), how));
}

// What the supervisor did on its own as the lock's validity ran out.
void lock_run::report_enforced(const child_process::deadline_enforcement& e, bool lost_reported) {
  auto when = [](milliseconds before) {
    return before.count() >= 0 ? fmt::format("{} ms before", before.count())
                               : fmt::format("{} ms after", -before.count());
  };
  std::string done = "the supervisor sent ";
  if (e.term_before) {
    done += fmt::format("SIGTERM to the command's process group {} ", when(*e.term_before));
    if (e.kill_before) done += fmt::format("and SIGKILL {} ", when(*e.kill_before));
  } else {
    done += fmt::format("SIGKILL to the command's process group {} ", when(*e.kill_before));
  }
  done += "the lock's validity ended";
  if (!e.term_before) done += ", before --kill-grace ran out";
  if (lost_reported) {
    print_err(fmt::format("{}: {}", what(), done));
    return;
  }
  print_err(fmt::format("{} lost while running: not extended in time; {}", what(), done));
}

bool lock_run::lost_now() {
  {
    std::lock_guard lk(ev_->mu);
    if (ev_->lost_reason) return true;
  }
  return held_lost();
}

std::string lock_run::lost_reason() {
  std::lock_guard lk(ev_->mu);
  return ev_->lost_reason.value_or(make_error_code(errc::lost).message());
}

result lock_run::release() {
  result r = release_held();
  if (cfg_.verbose()) print_err(fmt::format("released {}: {}", what(), r.describe()));
  return r;
}

// The release once the lock served its purpose: lost if the nodes show it
// ran out under us, else ok (a release that reached too few nodes only
// leaves keys that expire within --ttl).
int lock_run::release_after_use() {
  const result r = release();
  if (!r && (r.error == errc::expired || r.error == errc::taken || held_lost())) {
    print_err(fmt::format("{} lost while {}: {}", what(), cfg_.hold() ? "held" : "running", r.describe()));
    return exit_status::lost;
  }
  if (!r && !cfg_.quiet()) {
    print_err(fmt::format("could not release {} (it expires within --ttl): {}", what(), r.describe()));
  }
  return exit_status::ok;
}

int run_lock(std::span<char* const> args) {
  const lock_config cfg = parse_lock_config(args);
  if (cfg.help) {
    std::fwrite(lock_help.data(), 1, lock_help.size(), stdout);
    return exit_status::ok;
  }
  lock_run run(cfg);
  return run.run();
}

}  // namespace redsync::cli
