// Runs the real `redsync` binary ($REDSYNC_CLI) as a child process, with its
// stdout and stderr captured to files and every wait bounded.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace redsync::test {

/// How a finished run ended.
struct cli_outcome {
  /// Exit code, or 128 + the signal that killed the tool; -1 when it had to be
  /// killed for exceeding its bound.
  int status = -1;
  std::string out;  ///< everything written to stdout
  std::string err;  ///< everything written to stderr
  std::chrono::milliseconds elapsed{0};
  bool timed_out = false;
};

/// One run of the tool. The tool is started in its own process group, so
/// that a run killed for exceeding its bound takes its command with it, and
/// so that signals the test sends reach only the tool.
class cli_process {
 public:
  /// Starts `$REDSYNC_CLI args...` in `dir` (the captured output goes there
  /// too). REDSYNC_NODES and REDSYNC_LOCK_VALUE are removed from the
  /// environment so only the arguments choose the nodes, and so is every
  /// variable named in `unset_env`.
  cli_process(const std::vector<std::string>& args, const std::string& dir,
              const std::vector<std::string>& unset_env = {});
  /// SIGKILLs the process group and reaps the tool if it is still running.
  ~cli_process();
  cli_process(const cli_process&) = delete;
  cli_process& operator=(const cli_process&) = delete;

  pid_t pid() const { return pid_; }
  /// Sends `sig` to the tool only (not its command), unless it was reaped.
  void signal(int sig) const;
  /// True once the tool has exited (reaps it).
  bool exited();
  /// Waits up to `bound` for the tool to exit; on timeout kills its process
  /// group and returns an outcome with timed_out set.
  cli_outcome wait(std::chrono::milliseconds bound);
  /// What the tool has written to stdout / stderr so far.
  std::string out_so_far() const;
  std::string err_so_far() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> raw_status_;
  std::string out_path_;
  std::string err_path_;
  std::chrono::steady_clock::time_point started_;
};

/// Runs the tool to completion within `bound`.
cli_outcome run_cli(const std::vector<std::string>& args, const std::string& dir,
                    std::chrono::milliseconds bound = std::chrono::milliseconds{20'000},
                    const std::vector<std::string>& unset_env = {});

/// A fresh temporary directory, removed with its contents by the destructor.
class temp_dir {
 public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }
  /// path() + "/" + name.
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// The whole content of a file, or nullopt if it cannot be opened.
std::optional<std::string> read_file(const std::string& path);

}  // namespace redsync::test
