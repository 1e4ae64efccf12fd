#include "child_process.hpp"

#include "exit_status.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace redsync::cli {
namespace {

bool has_name(const char* entry, const std::string& name) {
  return std::strncmp(entry, name.c_str(), name.size()) == 0 && entry[name.size()] == '=';
}

// posix_spawn attributes and file actions as RAII owners.
struct spawn_attr {
  posix_spawnattr_t attr{};
  spawn_attr() { posix_spawnattr_init(&attr); }
  ~spawn_attr() { posix_spawnattr_destroy(&attr); }
  spawn_attr(const spawn_attr&) = delete;
  spawn_attr& operator=(const spawn_attr&) = delete;
};

}  // namespace

std::pair<std::optional<child_process>, int> child_process::spawn(
    const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& extra_env) {
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

  // The tool blocks the signals it handles through a signalfd; the command
  // must start with the ordinary (empty) mask. Dispositions are left alone,
  // so a signal ignored by whoever started the tool (nohup) stays ignored.
  spawn_attr sa;
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&sa.attr, &empty);
  posix_spawnattr_setflags(&sa.attr, POSIX_SPAWN_SETSIGMASK);

  pid_t pid = -1;
  // glibc's posix_spawnp reports exec failures (ENOENT, EACCES) as its
  // return value, so a missing command never looks like a started one.
  const int rc = posix_spawnp(&pid, args[0], nullptr, &sa.attr, args.data(), env.data());
  if (rc != 0) return {std::nullopt, rc};
  return {child_process(pid), 0};
}

void child_process::signal(int sig) const noexcept {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

bool child_process::try_wait() noexcept {
  if (status_ || pid_ <= 0) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) status_ = status;
  return status_.has_value();
}

int child_process::shell_status() const noexcept {
  if (!status_) return exit_status::software;
  if (WIFEXITED(*status_)) return WEXITSTATUS(*status_);
  if (WIFSIGNALED(*status_)) return exit_status::signal_base + WTERMSIG(*status_);
  return exit_status::software;
}

}  // namespace redsync::cli
