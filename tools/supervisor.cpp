// Everything here runs in a child forked from a multithreaded process, so it
// uses only async-signal-safe calls: no allocation, no locks, no stdio.
// (signalfd is a bare system call in glibc, as ppoll and clock_gettime are.)
#include "supervisor.hpp"

#include "exit_status.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>

namespace redsync::cli {
namespace {

constexpr long long ns_per_ms = 1'000'000;
constexpr long long ns_per_s = 1'000'000'000;
constexpr long long no_deadline = LLONG_MAX;

long long now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * ns_per_s + ts.tv_nsec;
}

// Whole milliseconds from `now` to `until`, rounded towards zero.
int ms_until(long long until, long long now) noexcept {
  return static_cast<int>((until - now) / ns_per_ms);
}

void report(int fd, report_kind kind, int value) noexcept {
  const supervisor_report r{kind, value};
  ssize_t n;
  do {
    n = ::write(fd, &r, sizeof r);
  } while (n < 0 && errno == EINTR);
}

// The command: dies with the supervisor, starts with the empty signal mask a
// shell would give it (the tool blocks the signals it reads from a signalfd),
// and reports a failed exec on error_fd, which closes on a successful one.
// Dispositions are left alone, so a signal ignored by whoever started the
// tool (nohup) stays ignored.
[[noreturn]] void exec_command(const supervisor_plan& plan, pid_t supervisor, int error_fd) noexcept {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The supervisor may have died before prctl took effect.
  if (::getppid() != supervisor) ::_exit(exit_status::software);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  // As execvp does: a path that is missing is skipped, a denied one is
  // remembered, any other failure is final.
  int err = ENOENT;
  bool denied = false;
  for (const char* const* c = plan.candidates; *c != nullptr; ++c) {
    ::execve(*c, plan.argv, plan.envp);
    if (errno == EACCES) {
      denied = true;
    } else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV &&
               errno != ETIMEDOUT) {
      err = errno;
      break;
    }
  }
  if (err == ENOENT && denied) err = EACCES;
  ssize_t n;
  do {
    n = ::write(error_fd, &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::_exit(exit_status::not_found);
}

// What the tool said on the deadline pipe so far.
struct deadline_state {
  long long until = 0;  // the latest validity end, CLOCK_MONOTONIC ns; 0 = none
  bool lost = false;    // the tool reported the loss: no later validity end counts
  bool open = false;    // false once the tool's end is closed
};

// Takes in every message waiting on the (non-blocking) pipe.
void read_deadlines(int fd, deadline_state& d) noexcept {
  std::int64_t buf[64];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) d.open = false;
    if (n <= 0) return;
    // Writes of 8 bytes are atomic and reads take whole multiples of them.
    for (ssize_t i = 0; i < n / static_cast<ssize_t>(sizeof buf[0]); ++i) {
      if (buf[i] == deadline_lost) {
        d.lost = true;
      } else if (!d.lost && buf[i] > d.until) {
        d.until = buf[i];
      }
    }
  }
}

// Closes every descriptor except `a` and `b` (either may be -1).
void close_all_but(int a, int b) noexcept {
  const int lo = a < b ? a : b;
  const int hi = a < b ? b : a;
  const int keep_all[2] = {lo, hi};
  unsigned next = 0;
  for (int keep : keep_all) {
    if (keep < 0) continue;
    if (static_cast<unsigned>(keep) > next) ::close_range(next, static_cast<unsigned>(keep) - 1, 0);
    next = static_cast<unsigned>(keep) + 1;
  }
  ::close_range(next, UINT_MAX, 0);
}

}  // namespace

[[noreturn]] void run_supervisor(const supervisor_plan& plan) noexcept {
  // Every catchable signal stays pending: signals sent to the group are meant
  // for the command, and none may stop or kill the supervisor, which alone can
  // clean up the group. It only ever takes these two, synchronously.
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  sigset_t wake;
  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, tool_died_signal);

  const pid_t self = ::getpid();
  ::setpgid(0, 0);  // the tool does it too: whichever runs first
  ::prctl(PR_SET_PDEATHSIG, tool_died_signal);
  // Orphans of the command are reparented here, not to init: their exit is
  // how the supervisor knows the group is empty.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // The tool may have died before prctl took effect.
  bool tool_alive = ::getppid() == plan.tool;
  // Blocked SIGTTOU lets a background process take the terminal.
  if (plan.take_terminal) ::tcsetpgrp(STDIN_FILENO, self);

  int error_pipe[2];
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    report(plan.report_fd, report_kind::exec_failed, errno);
    ::_exit(0);
  }
  const pid_t command = ::fork();
  if (command == 0) {
    ::close(error_pipe[0]);
    exec_command(plan, self, error_pipe[1]);
  }
  ::close(error_pipe[1]);
  if (command < 0) {
    report(plan.report_fd, report_kind::exec_failed, errno);
    ::_exit(0);
  }
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_pipe[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  ::close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    int status = 0;
    while (::waitpid(command, &status, 0) < 0 && errno == EINTR) {
    }
    report(plan.report_fd, report_kind::exec_failed, exec_errno);
    ::_exit(0);
  }
  report(plan.report_fd, report_kind::started, command);
  // The command has its copies; holding the tool's sockets, or a pipe's
  // write end some reader waits on, would only delay their closing.
  // (The report pipe is fd 0 when the tool was started with stdin closed.)
  close_all_but(plan.report_fd, plan.deadline_fd);
  // SIGCHLD and the tool's death as a descriptor, so that one ppoll() waits
  // for them and for the deadline pipe. Should it fail, the loop polls.
  const int signals = ::signalfd(-1, &wake, SFD_NONBLOCK | SFD_CLOEXEC);
  constexpr long long poll_without_signalfd = 10 * ns_per_ms;

  deadline_state deadline{.until = plan.valid_until_ns, .lost = false, .open = plan.deadline_fd >= 0};
  bool command_done = false;
  bool terminating = false;         // the group has had SIGTERM
  long long kill_at = no_deadline;  // --kill-grace after the SIGTERM
  auto terminate_group = [&](long long now) {
    if (terminating) return;
    terminating = true;
    ::kill(-self, SIGTERM);
    kill_at = now + plan.kill_grace_ns;
  };
  for (;;) {
    // Drained before waitpid: a child that exits after this read leaves the
    // signalfd readable again, so ppoll() cannot sleep through its exit.
    if (signals >= 0) {
      signalfd_siginfo info;
      while (::read(signals, &info, sizeof info) > 0) {
      }
    }
    int status = 0;
    const pid_t r = ::waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (r == command && WIFSTOPPED(status)) {
      // Ctrl-Z would stop the command while the tool keeps extending the lock
      // for it, holding the lock indefinitely: job-control stop is undone.
      if (WSTOPSIG(status) == SIGTSTP) ::kill(-self, SIGCONT);
      continue;
    }
    if (r == command) {
      command_done = true;
      report(plan.report_fd, report_kind::exited, status);
      continue;
    }
    if (r > 0 || (r < 0 && errno == EINTR)) continue;
    if (r < 0) {
      // ECHILD: the command and every process it left behind have exited.
      ::_exit(0);
    }
    // Some process of ours still runs. Whatever woke us, look at everything.
    if (deadline.open) read_deadlines(plan.deadline_fd, deadline);
    if (tool_alive && ::getppid() != plan.tool) tool_alive = false;
    const long long now = now_ns();
    if (command_done || !tool_alive || deadline.lost) terminate_group(now);
    // A validity end whose successor has not come: the tool is stopped or
    // cannot extend. The SIGKILL must land before it, so the SIGTERM goes
    // out term_lead before it, whatever --kill-grace says (deadline.hpp).
    const long long term_by = deadline.until > 0 ? deadline.until - plan.term_lead_ns : no_deadline;
    const long long kill_by = deadline.until > 0 ? deadline.until - plan.kill_margin_ns : no_deadline;
    if (!terminating && now >= term_by) {
      report(plan.report_fd, report_kind::deadline_term, ms_until(deadline.until, now));
      terminate_group(now);
    }
    if (terminating && (now >= kill_at || now >= kill_by)) {
      if (now < kill_at) report(plan.report_fd, report_kind::deadline_kill, ms_until(deadline.until, now));
      ::kill(-self, SIGKILL);  // the supervisor too: nothing is left to wait for
      ::_exit(0);
    }
    long long wake_at = terminating ? (kill_at < kill_by ? kill_at : kill_by) : term_by;
    if (signals < 0 && wake_at - now > poll_without_signalfd) wake_at = now + poll_without_signalfd;
    pollfd fds[2] = {{signals, POLLIN, 0}, {deadline.open ? plan.deadline_fd : -1, POLLIN, 0}};
    if (wake_at == no_deadline) {
      ::ppoll(fds, 2, nullptr, nullptr);
    } else {
      const long long left = wake_at - now;
      const timespec ts{static_cast<time_t>(left / ns_per_s), static_cast<long>(left % ns_per_s)};
      ::ppoll(fds, 2, &ts, nullptr);
    }
  }
}

}  // namespace redsync::cli
