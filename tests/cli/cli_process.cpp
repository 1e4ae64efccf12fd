#include "cli_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace redsync::test {
namespace {

std::string cli_binary() {
  const char* env = std::getenv("REDSYNC_CLI");
  if (env == nullptr || *env == '\0') {
    throw std::runtime_error("REDSYNC_CLI is not set (meson test sets it to the built tool)");
  }
  return env;
}

// Distinct capture files for every run in this test process.
std::string next_capture_base(const std::string& dir) {
  static int counter = 0;
  return dir + "/cli-" + std::to_string(++counter);
}

bool starts_with(const char* entry, const char* prefix) {
  return std::strncmp(entry, prefix, std::strlen(prefix)) == 0;
}

}  // namespace

cli_process::cli_process(const std::vector<std::string>& args, const std::string& dir,
                         const std::vector<std::string>& unset_env)
    : out_path_(next_capture_base(dir)), err_path_(out_path_ + ".err") {
  out_path_ += ".out";
  const std::string binary = cli_binary();
  std::vector<std::string> argv_store{binary};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (starts_with(*e, "REDSYNC_NODES=") || starts_with(*e, "REDSYNC_LOCK_VALUE=")) continue;
    bool unset = false;
    for (const auto& name : unset_env) unset = unset || starts_with(*e, (name + "=").c_str());
    if (!unset) env.push_back(*e);
  }
  env.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addchdir_np(&actions, dir.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  // The test's SIGPIPE is ignored (see main.cpp); the tool starts as a shell
  // would start it.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  started_ = std::chrono::steady_clock::now();
  const int rc = posix_spawn(&pid_, binary.c_str(), &actions, &attr, argv.data(), env.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn " + binary + ": " + std::strerror(rc));
}

cli_process::~cli_process() {
  if (pid_ > 0 && !raw_status_) {
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void cli_process::signal(int sig) const {
  if (pid_ > 0 && !raw_status_) ::kill(pid_, sig);
}

bool cli_process::exited() {
  if (raw_status_) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) raw_status_ = status;
  return raw_status_.has_value();
}

cli_outcome cli_process::wait(std::chrono::milliseconds bound) {
  const auto deadline = started_ + bound;
  cli_outcome o;
  while (!exited()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      // Take the tool's command with it: both are in the tool's group.
      ::kill(-pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      raw_status_ = status;
      o.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  o.elapsed =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
  if (!o.timed_out) {
    if (WIFEXITED(*raw_status_)) o.status = WEXITSTATUS(*raw_status_);
    if (WIFSIGNALED(*raw_status_)) o.status = 128 + WTERMSIG(*raw_status_);
  }
  o.out = read_file(out_path_).value_or("");
  o.err = read_file(err_path_).value_or("");
  return o;
}

std::string cli_process::out_so_far() const {
  return read_file(out_path_).value_or("");
}

std::string cli_process::err_so_far() const {
  return read_file(err_path_).value_or("");
}

cli_outcome run_cli(const std::vector<std::string>& args, const std::string& dir,
                    std::chrono::milliseconds bound, const std::vector<std::string>& unset_env) {
  cli_process p(args, dir, unset_env);
  return p.wait(bound);
}

temp_dir::temp_dir() {
  std::string tmpl = std::filesystem::temp_directory_path().string() + "/redsync-cli-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp: " + std::string(std::strerror(errno)));
  }
  path_ = tmpl;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace redsync::test
