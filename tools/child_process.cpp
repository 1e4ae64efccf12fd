#include "child_process.hpp"

#include "exit_status.hpp"
#include "supervisor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace redsync::cli {
namespace {

bool has_name(const char* entry, const std::string& name) {
  return std::strncmp(entry, name.c_str(), name.size()) == 0 && entry[name.size()] == '=';
}

// The paths execvp would try, in order: searching PATH allocates, which the
// forked supervisor may not do. An empty PATH entry means the current
// directory; without PATH, glibc's default.
std::vector<std::string> exec_candidates(const std::string& file) {
  if (file.find('/') != std::string::npos) return {file};
  const char* env = std::getenv("PATH");
  const std::string path = env != nullptr ? env : "/bin:/usr/bin";
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t colon = path.find(':', start);
    const std::string dir =
        path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    out.push_back(dir.empty() ? file : dir + "/" + file);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

// Nanoseconds of CLOCK_MONOTONIC, the supervisor's clock: steady_clock is
// CLOCK_MONOTONIC in libstdc++ and libc++ on Linux.
long long monotonic_ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

long long to_ns(std::chrono::microseconds d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

bool read_report(int fd, supervisor_report& r) {
  ssize_t n;
  do {
    n = ::read(fd, &r, sizeof r);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof r);
}

void reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::pair<std::optional<child_process>, int> child_process::spawn(
    const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& extra_env,
    const spawn_options& options) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  std::vector<std::string> added;
  for (const auto& [name, value] : extra_env) added.push_back(name + "=" + value);
  std::vector<char*> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    bool replaced = false;
    for (const auto& [name, value] : extra_env) replaced = replaced || has_name(*e, name);
    if (!replaced) env.push_back(*e);
  }
  for (auto& a : added) env.push_back(a.data());
  env.push_back(nullptr);

  const std::vector<std::string> candidates = exec_candidates(argv.at(0));
  std::vector<const char*> candidate_ptrs;
  for (const auto& c : candidates) candidate_ptrs.push_back(c.c_str());
  candidate_ptrs.push_back(nullptr);

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return {std::nullopt, errno};
  // Non-blocking at both ends: the supervisor must never wait for the tool,
  // nor the tool for a supervisor that does not read.
  int deadline[2];
  if (::pipe2(deadline, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(report[0]);
    ::close(report[1]);
    return {std::nullopt, err};
  }
  const bool has_deadline = options.valid_until != std::chrono::steady_clock::time_point{};
  const supervisor_plan plan{
      .argv = args.data(),
      .envp = env.data(),
      .candidates = candidate_ptrs.data(),
      .tool = ::getpid(),
      .report_fd = report[1],
      .deadline_fd = deadline[0],
      .valid_until_ns = has_deadline ? monotonic_ns(options.valid_until) : 0,
      .term_lead_ns = to_ns(options.margins.term_lead),
      .kill_margin_ns = to_ns(options.margins.kill_margin),
      .kill_grace_ns = to_ns(options.kill_grace),
      .take_terminal = options.take_terminal,
  };
  // fork, not posix_spawn: the supervisor must set PR_SET_PDEATHSIG and its
  // process group before the command starts, which no spawn attribute does.
  // PR_SET_PDEATHSIG fires when the forking *thread* exits: this is the main
  // thread, which lives as long as the tool.
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(report[0]);
    ::close(deadline[1]);
    run_supervisor(plan);
  }
  const int fork_errno = errno;
  ::close(report[1]);
  ::close(deadline[0]);
  if (pid < 0) {
    ::close(report[0]);
    ::close(deadline[1]);
    return {std::nullopt, fork_errno};
  }
  // The supervisor does this too; doing it here as well means the group exists
  // before the tool can signal it, whichever process runs first.
  ::setpgid(pid, pid);

  supervisor_report first;
  if (!read_report(report[0], first) || first.kind != report_kind::started) {
    const int err = first.kind == report_kind::exec_failed ? first.value : ECHILD;
    reap(pid);
    ::close(report[0]);
    ::close(deadline[1]);
    return {std::nullopt, err};
  }
  // What follows is read once the supervisor was reaped, without waiting.
  ::fcntl(report[0], F_SETFL, ::fcntl(report[0], F_GETFL) | O_NONBLOCK);
  return {child_process(pid, first.value, report[0], deadline[1], options.take_terminal, options.valid_until),
          0};
}

child_process::~child_process() {
  if (report_fd_ >= 0) ::close(report_fd_);
  if (deadline_fd_ >= 0) ::close(deadline_fd_);
}

bool child_process::send_deadline(long long value) noexcept {
  if (deadline_fd_ < 0 || status_) return false;
  ssize_t n;
  do {
    n = ::write(deadline_fd_, &value, sizeof value);
  } while (n < 0 && errno == EINTR);
  // A full pipe means a supervisor that has not read for a very long time;
  // EPIPE, one that has exited (the tool reads SIGPIPE from its signalfd).
  return n == static_cast<ssize_t>(sizeof value);
}

void child_process::extend_deadline(std::chrono::steady_clock::time_point until) noexcept {
  if (until <= last_until_) return;
  if (send_deadline(monotonic_ns(until))) last_until_ = until;
}

void child_process::terminate_group() noexcept {
  if (status_) return;
  // Should the supervisor not take the message, the SIGTERM at least goes
  // out; its deadline still brings the SIGKILL.
  if (!send_deadline(deadline_lost)) signal(SIGTERM);
}

bool child_process::command_ignores(int sig) const noexcept {
  if (status_ || command_pid_ <= 0 || sig < 1 || sig > 64) return false;
  // "SigIgn:\t0000000000000006": bit N-1 set when signal N is ignored.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(command_pid_));
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char line[256];
  bool ignored = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long mask = 0;
    if (std::sscanf(line, "SigIgn: %llx", &mask) == 1) {
      ignored = (mask >> (sig - 1)) & 1U;
      break;
    }
  }
  std::fclose(f);
  return ignored;
}

void child_process::signal(int sig) const noexcept {
  if (pid_ > 0 && !status_) ::kill(-pid_, sig);
}

bool child_process::try_wait() noexcept {
  if (status_ || pid_ <= 0) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return false;
  // The supervisor reported the command's status before exiting, unless it
  // was killed first (SIGKILL to the group after --kill-grace), and what it
  // did on its own because the lock's validity was running out.
  std::optional<int> command_status;
  supervisor_report report;
  while (read_report(report_fd_, report)) {
    switch (report.kind) {
      case report_kind::exited: command_status = report.value; break;
      case report_kind::deadline_term: enforced_.term_before = std::chrono::milliseconds(report.value); break;
      case report_kind::deadline_kill: enforced_.kill_before = std::chrono::milliseconds(report.value); break;
      case report_kind::started:
      case report_kind::exec_failed: break;
    }
  }
  status_ = command_status.value_or(status);
  // The group is gone; the terminal returns to the tool's group, which the
  // shell waits on. SIGTTOU is blocked, so a background tool may do this.
  if (take_terminal_) ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  return true;
}

int child_process::shell_status() const noexcept {
  if (!status_) return exit_status::software;
  if (WIFEXITED(*status_)) return WEXITSTATUS(*status_);
  if (WIFSIGNALED(*status_)) return exit_status::signal_base + WTERMSIG(*status_);
  return exit_status::software;
}

}  // namespace redsync::cli
