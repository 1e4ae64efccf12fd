// The supervisor: the tool's direct child, forked (never exec'd) from the
// multithreaded tool. It leads the command's process group, starts the
// command in it, and makes sure nothing of that group outlives the command or
// the tool:
//
//   tool ── supervisor (pgid G, child subreaper, PDEATHSIG from the tool)
//             └─ command (pgid G, PDEATHSIG SIGKILL from the supervisor)
//                  └─ its children (pgid G unless they leave it)
//
// The kernel's PR_SET_PDEATHSIG only reaches a dying process's direct child,
// so the command gets it from the supervisor; the supervisor gets its own from
// the tool and then signals the whole group. Because it leads the group and
// adopts the command's orphans, the group id cannot be reused by an unrelated
// process while the supervisor lives, and it can tell when every descendant
// has exited.
//
// The lock's validity: the tool sends the supervisor each validity end it
// learns (deadline.hpp). If none newer arrives in time, because the tool is
// stopped (SIGSTOP, a freezer, a debugger), starved, or its extensions keep
// failing, the supervisor ends the group before the lock's validity ends:
// nothing else would, and the lock may then go to another client.
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace redsync::cli {

/// What the supervisor tells the tool through its report pipe, in order:
/// `started` (value: the command's pid) or `exec_failed` (value: errno),
/// then, in the order they happen, `exited` (value: the command's raw wait
/// status), `deadline_term` (the supervisor sent SIGTERM to the group because
/// no newer validity end arrived; value: milliseconds left until the validity
/// end, negative if past) and `deadline_kill` (it sent SIGKILL before
/// --kill-grace ran out because the validity end was near; value: the same).
enum class report_kind : int {
  started = 1,
  exec_failed = 2,
  exited = 3,
  deadline_term = 4,
  deadline_kill = 5
};
struct supervisor_report {
  report_kind kind{};
  int value = 0;
};

/// Everything the supervisor needs, built before fork: after fork in a
/// multithreaded process it may only make async-signal-safe calls, so it
/// cannot allocate, and PATH was searched in advance.
struct supervisor_plan {
  char* const* argv = nullptr;              ///< null-terminated
  char* const* envp = nullptr;              ///< null-terminated
  const char* const* candidates = nullptr;  ///< paths to execve in turn, null-terminated
  pid_t tool = -1;                          ///< the parent; getppid() differs once it died
  int report_fd = -1;                       ///< write end of the report pipe
  /// Read end of the deadline pipe (non-blocking), or -1: the tool writes
  /// 8-byte values, each a later validity end in CLOCK_MONOTONIC
  /// nanoseconds, or 0 = the lock is lost: end the group now.
  int deadline_fd = -1;
  long long valid_until_ns = 0;  ///< the first validity end (CLOCK_MONOTONIC ns); 0 = none
  long long term_lead_ns = 0;    ///< SIGTERM this long before the validity end
  long long kill_margin_ns = 0;  ///< SIGKILL this long before it, at the latest
  long long kill_grace_ns = 0;   ///< SIGTERM to SIGKILL otherwise
  bool take_terminal = false;    ///< make the group the terminal's foreground group
};

/// The message on the deadline pipe that says the lock is lost.
inline constexpr long long deadline_lost = 0;

/// The signal the supervisor gets when the tool dies (PR_SET_PDEATHSIG).
/// Forwarded signals may also wake it; getppid() tells them apart.
inline constexpr int tool_died_signal = SIGHUP;  // the parent "hung up"

/// Runs in the forked child; never returns. Exits 0 once the command and
/// every process it left behind have exited. SIGTERMs the group when the
/// command has exited leaving processes behind, when the tool dies, when the
/// tool says the lock is lost, and `term_lead_ns` before the last validity
/// end received; SIGKILLs the group, itself included, kill_grace_ns after
/// the SIGTERM or `kill_margin_ns` before the validity end, whichever comes
/// first.
[[noreturn]] void run_supervisor(const supervisor_plan& plan) noexcept;

}  // namespace redsync::cli
