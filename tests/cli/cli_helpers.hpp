// Helpers shared by the tests of the `redsync` tool (tests/cli/*_test.cpp):
// node lists, what the nodes hold, processes, and the tool's exit statuses.
#pragma once

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include "cli_process.hpp"
#include "fresh_nodes.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

namespace redsync::test {

using namespace std::chrono_literals;

// The harness starts its nodes moments before each test; the tool's restart
// guard would rightly keep them out of every quorum for --ttl. The variable
// is inherited by every tool process a test starts.
inline const int restart_guard_off = setenv("REDSYNC_RESTART_GUARD", "0", 1);

// Exit statuses of the tool (see tools/main.cpp).
inline constexpr int usage_status = 64;
inline constexpr int unavailable_status = 69;
inline constexpr int not_acquired_status = 75;
inline constexpr int node_errors_status = 76;
inline constexpr int refused_status = 77;
inline constexpr int lost_status = 79;

inline std::string nodes_arg(const cluster& c) {
  std::string list;
  for (const auto& uri : c.uris()) list += (list.empty() ? "" : ",") + uri;
  return "--nodes=" + list;
}

// `lock --nodes=... OPTIONS... NAME [-- COMMAND...]`: hold mode without a command.
inline std::vector<std::string> lock_args(const cluster& c, std::vector<std::string> options,
                                          const std::string& name, const std::vector<std::string>& command) {
  std::vector<std::string> args{"lock", nodes_arg(c)};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(name);
  if (!command.empty()) {
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
  }
  return args;
}

// The value of `key` on each node (nullopt: absent, or the node is down).
inline std::vector<std::optional<std::string>> values_on(cluster& c, const std::string& key) {
  std::vector<std::optional<std::string>> out;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!c[i].running() || c[i].paused()) {
      out.emplace_back();
      continue;
    }
    redis_client client(c[i], {.timeout = 500ms});
    out.push_back(client.get(key));
  }
  return out;
}

inline std::size_t nodes_holding(cluster& c, const std::string& key) {
  std::size_t n = 0;
  for (const auto& v : values_on(c, key)) n += v ? 1 : 0;
  return n;
}

// A --json answer is one line holding one object whose braces and brackets
// balance outside strings.
inline bool one_json_object(const std::string& out) {
  if (out.empty() || out.front() != '{' || out.find('\n') != out.size() - 1 || out[out.size() - 2] != '}') {
    return false;
  }
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i + 1 < out.size(); ++i) {
    const char c = out[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    if (depth == 0 && i + 2 < out.size()) return false;
  }
  return depth == 0 && !in_string;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline std::string cli_path() {
  const char* p = std::getenv("REDSYNC_CLI");
  return p != nullptr ? p : "";
}

// Gone or a zombie: an orphan's zombie may linger when no init reaps it, and
// a zombie runs nothing.
inline bool process_gone(pid_t pid) {
  if (::kill(pid, 0) == -1 && errno == ESRCH) return true;
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat").value_or("");
  const auto paren = stat.rfind(')');
  return paren == std::string::npos || (paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

// The pid a command wrote to `path` (one line), once the line is complete.
inline std::optional<pid_t> pid_in(const std::string& path) {
  const std::string s = read_file(path).value_or("");
  if (s.find('\n') == std::string::npos) return std::nullopt;
  return static_cast<pid_t>(std::stoi(s));
}

// True once `pid` is stopped (SIGSTOP): state T in /proc/PID/stat.
inline bool process_stopped(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat").value_or("");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
}

// Takes the lock `name` with a library Mutex as soon as it is free, trying
// for up to `bound`, and releases it again. Returns whether `pid` was still
// running at the moment the lock was granted; nullopt if it never was.
inline std::optional<bool> running_when_taken_over(const cluster& c, const std::string& name, pid_t pid,
                                                   std::chrono::milliseconds bound) {
  redsync::Redsync rs(c.uris(), redsync::test::fresh_nodes());
  auto other = rs.new_mutex(name, {.expiry = 5s, .tries = 1});
  std::optional<bool> running;
  wait_until(
      [&] {
        if (!other.try_lock(redsync::context::timeout(1s))) return false;
        running = !process_gone(pid);
        return true;
      },
      bound);
  if (running) (void)other.unlock(redsync::context::timeout(2s));
  return running;
}

// Checks that `command` is gone within 3 s, and that it was no longer
// running when another client could take the lock `name` (within 10 s).
inline void check_gone_before_taken_over(const cluster& c, const std::string& name, pid_t command) {
  CHECK(wait_until([&] { return process_gone(command); }, 3s));
  const std::optional<bool> running = running_when_taken_over(c, name, command, 10s);
  REQUIRE(running.has_value());
  CHECK_FALSE(*running);
}

// Kills what a failed test left running; a passing test leaves nothing.
struct kill_leftovers {
  std::vector<std::string> pid_files;
  ~kill_leftovers() {
    for (const auto& f : pid_files) {
      if (auto pid = pid_in(f); pid && *pid > 1 && !process_gone(*pid)) ::kill(*pid, SIGKILL);
    }
  }
};

// Prints what the tool said when a check fails.
/// Waits (at most `bound`) for `p` to end while nodes 0, 1 and 2 of `c` are
/// frozen (SIGSTOP: they take connections but never answer, so no quorum of
/// five is reached), then resumes them.
inline cli_outcome wait_with_three_frozen(cluster& c, cli_process& p, std::chrono::milliseconds bound) {
  for (std::size_t i = 0; i < 3; ++i) c[i].pause();
  auto o = p.wait(bound);
  for (std::size_t i = 0; i < 3; ++i) c[i].resume();
  return o;
}

inline std::string show(const cli_outcome& o) {
  return "status " + std::to_string(o.status) + (o.timed_out ? " (timed out)" : "") + ", " +
         std::to_string(o.elapsed.count()) + " ms\n--- stdout\n" + o.out + "--- stderr\n" + o.err;
}

}  // namespace redsync::test
