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
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace redsync::cli {

/// What the supervisor tells the tool through its report pipe, in order:
/// `started` (value: the command's pid) or `exec_failed` (value: errno),
/// then `exited` (value: the command's raw wait status).
enum class report_kind : int { started = 1, exec_failed = 2, exited = 3 };
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
  long kill_grace_ms = 0;                   ///< SIGTERM to SIGKILL, milliseconds
  bool take_terminal = false;               ///< make the group the terminal's foreground group
};

/// The signal the supervisor gets when the tool dies (PR_SET_PDEATHSIG).
/// Forwarded signals may also wake it; getppid() tells them apart.
inline constexpr int tool_died_signal = SIGHUP;  // the parent "hung up"

/// Runs in the forked child; never returns. Exits 0 once the command and
/// every process it left behind have exited; if some survive SIGTERM for
/// kill_grace_ms (or the tool dies), SIGKILLs the group, itself included.
[[noreturn]] void run_supervisor(const supervisor_plan& plan) noexcept;

}  // namespace redsync::cli
