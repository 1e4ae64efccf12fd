// Everything here runs in a child forked from a multithreaded process, so it
// uses only async-signal-safe calls: no allocation, no locks, no stdio. (The
// sigwaitinfo family is a bare system call in glibc.)
#include "supervisor.hpp"

#include "exit_status.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace redsync::cli {
namespace {

long now_ms() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1'000'000;
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
  if (plan.report_fd > 0) ::close_range(0, static_cast<unsigned>(plan.report_fd) - 1, 0);
  ::close_range(static_cast<unsigned>(plan.report_fd) + 1, UINT_MAX, 0);

  bool command_done = false;
  long kill_at = -1;  // once set, the group has had SIGTERM
  auto terminate_group = [&] {
    if (kill_at >= 0) return;
    ::kill(-self, SIGTERM);
    kill_at = now_ms() + plan.kill_grace_ms;
  };
  for (;;) {
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
    // Some process of ours still runs after the command or the tool is gone.
    if (tool_alive && ::getppid() != plan.tool) tool_alive = false;
    if (command_done || !tool_alive) terminate_group();
    if (kill_at >= 0 && now_ms() >= kill_at) {
      ::kill(-self, SIGKILL);  // the supervisor too: nothing is left to wait for
      ::_exit(0);
    }
    siginfo_t info;
    if (kill_at >= 0) {
      const long left = kill_at - now_ms();
      const timespec ts{left / 1000, (left % 1000) * 1'000'000};
      ::sigtimedwait(&wake, &info, &ts);
    } else {
      ::sigwaitinfo(&wake, &info);
    }
  }
}

}  // namespace redsync::cli
