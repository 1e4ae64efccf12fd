// Contention demo: W worker processes each add 1 to a counter K times. The
// counter is a plain file, updated the unsafe way (read, add one, write back),
// so only mutual exclusion keeps updates from being lost: the final count
// equals W*K if and only if no two workers were ever inside at once.
//
// Every worker takes the same Redlock lock around each increment and records
// how long each acquisition took; the parent gathers the latencies over pipes
// and prints the final count and the latency percentiles. With
// --kill-node-after N it SIGKILLs one Redis node (through scripts/testbed,
// whose path is in $REDSYNC_TESTBED) once the counter reaches N: the lock
// keeps working on the remaining majority, and the count still adds up.
//
//   build/examples/counter_demo [--workers W] [--increments K]
//                               [--kill-node-after N] [--kill-node I]
//                               [--no-lock] [redis://127.0.0.1:7001 ...]
//
// --no-lock skips the lock, to show what it prevents: lost updates.
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "nodes.hpp"

using namespace std::chrono_literals;
using std::chrono::steady_clock;

namespace {

constexpr const char* lock_name = "counter_demo:counter";

struct settings {
  int workers = 4;
  int increments = 250;
  std::optional<long> kill_after;  // kill a node once the counter reaches this
  int kill_node = 3;
  bool use_lock = true;
  std::vector<std::string> nodes;
};

// What a worker reports to the parent: this header, then `acquisitions`
// latencies in microseconds.
struct worker_report {
  std::int64_t acquisitions = 0;
  std::int64_t failed_acquisitions = 0;
  std::int64_t failed_releases = 0;
};

constexpr std::string_view usage =
    "Usage: counter_demo [--workers W] [--increments K] [--kill-node-after N]\n"
    "                    [--kill-node I] [--no-lock] [--help] [URI...]\n\n"
    "W worker processes (default 4) each add 1, K times (default 250), to a counter\n"
    "kept in a plain file, under one Redlock lock; prints the final count against\n"
    "W*K and the acquire-latency percentiles.\n\n"
    "  --kill-node-after N  SIGKILL node I (--kill-node, default 3) once the counter\n"
    "                       reaches N, through scripts/testbed (path in $REDSYNC_TESTBED)\n"
    "  --no-lock            skip the lock, to show what it prevents: lost updates\n";

[[noreturn]] void usage_error(const std::string& message) {
  fmt::print(stderr, "counter_demo: {}\n", message);
  std::exit(2);
}

long parse_number(std::string_view flag, const char* text, long min) {
  char* end = nullptr;
  errno = 0;
  const long v = text == nullptr ? 0 : std::strtol(text, &end, 10);
  if (text == nullptr || *text == '\0' || *end != '\0' || errno != 0 || v < min) {
    usage_error(fmt::format("{} needs a number >= {}, got '{}'", flag, min, text ? text : ""));
  }
  return v;
}

settings parse_args(int argc, char** argv) {
  settings s;
  std::vector<char*> uris{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--workers")
      s.workers = static_cast<int>(parse_number(arg, next, 1)), ++i;
    else if (arg == "--increments")
      s.increments = static_cast<int>(parse_number(arg, next, 1)), ++i;
    else if (arg == "--kill-node-after")
      s.kill_after = parse_number(arg, next, 0), ++i;
    else if (arg == "--kill-node")
      s.kill_node = static_cast<int>(parse_number(arg, next, 1)), ++i;
    else if (arg == "--no-lock")
      s.use_lock = false;
    else if (examples::is_help(arg)) {
      examples::print_usage(usage);
      std::exit(0);
    } else if (arg.starts_with("-"))
      usage_error(fmt::format("unknown option {} (see --help)", arg));
    else
      uris.push_back(argv[i]);
  }
  s.nodes = examples::node_uris(static_cast<int>(uris.size()), uris.data(), usage);
  return s;
}

// ---- the shared counter: a decimal number in a file ------------------------

// Always written at this width, so a write replaces the whole previous text
// even when it carries a smaller number (which happens without the lock).
constexpr int counter_width = 20;

long read_counter(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  return n > 0 ? std::strtol(buf, nullptr, 10) : 0;
}

// Deliberately not atomic: a second process between the read and the write
// makes one of the two increments vanish.
void increment_counter(int fd) {
  const long value = read_counter(fd);
  std::this_thread::sleep_for(100us);  // "work", and a wide window for a race
  const std::string text = fmt::format("{:>{}}", value + 1, counter_width);
  if (pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    throw std::runtime_error(fmt::format("write to the counter file: {}", std::strerror(errno)));
  }
}

// ---- pipes ------------------------------------------------------------------

void write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("write to the parent: {}", std::strerror(errno)));
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

// ---- a worker process -------------------------------------------------------

// `fd` is the counter file, shared with the parent and the other workers
// (pread/pwrite at offset 0, so the shared file position does not matter).
int run_worker(const settings& s, int fd, int out) {
  // Made after fork(): a Redsync owns a loop thread, which fork() would not copy.
  redsync::Redsync rs(s.nodes);
  auto mutex = rs.new_mutex(
      lock_name,
      {
          .expiry = 2s,     // the critical section takes ~0.1 ms; a crashed worker blocks others 2 s at most
          .tries = 100000,  // keep trying: the context's deadline bounds the wait instead
          .retry_delay =
              [](int) {  // short and random, so contenders do not retry in lockstep
                thread_local std::mt19937 rng{std::random_device{}()};
                return std::chrono::milliseconds(std::uniform_int_distribution<int>(1, 3)(rng));
              },
          .auto_extend = false,
      });

  worker_report report;
  std::vector<std::int64_t> latencies_us;
  latencies_us.reserve(static_cast<std::size_t>(s.increments));
  int consecutive_failures = 0;
  for (int i = 0; i < s.increments;) {
    if (s.use_lock) {
      const auto start = steady_clock::now();
      auto r = mutex.lock(redsync::context::timeout(30s));
      if (!r) {
        ++report.failed_acquisitions;
        fmt::print(stderr, "worker {}: lock failed: {}\n", getpid(), r.describe());
        if (++consecutive_failures == 3) break;  // the nodes are gone; give up
        continue;                                // this increment is retried
      }
      consecutive_failures = 0;
      const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - start);
      latencies_us.push_back(waited.count());
    }
    increment_counter(fd);
    ++i;
    if (s.use_lock) {
      if (auto r = mutex.unlock(redsync::context::timeout(2s)); !r) {
        ++report.failed_releases;
        fmt::print(stderr, "worker {}: unlock failed: {}\n", getpid(), r.describe());
      }
    }
  }
  report.acquisitions = static_cast<std::int64_t>(latencies_us.size());
  write_all(out, &report, sizeof report);
  write_all(out, latencies_us.data(), latencies_us.size() * sizeof(std::int64_t));
  return consecutive_failures == 0 ? 0 : 1;
}

// ---- the parent ---------------------------------------------------------------

// One lock and unlock before forking, so that unreachable nodes give one clear
// message instead of W workers failing. On a fresh testbed it also waits out
// the restart guard window (the nodes vote only 2 s after a client first met
// them). The Redsync (and its loop thread) is gone again before fork().
bool nodes_reachable(const settings& s) {
  redsync::Redsync rs(s.nodes);
  auto mutex = rs.new_mutex(lock_name, {.expiry = 2s, .tries = 100});
  auto r = mutex.lock(redsync::context::timeout(5s));
  if (!r) {
    fmt::print(stderr, "counter_demo: cannot take the lock: {}\n", r.describe());
    if (examples::nodes_unreachable(r)) fmt::print(stderr, "({})\n", examples::unreachable_hint);
    return false;
  }
  (void)mutex.unlock(redsync::context::timeout(2s));
  return true;
}

void kill_node(const settings& s, long at) {
  const char* testbed = std::getenv("REDSYNC_TESTBED");
  const std::string command = fmt::format("'{}' kill {} >/dev/null", testbed, s.kill_node);
  if (std::system(command.c_str()) == 0) {
    fmt::print("node {} killed at i={}\n", s.kill_node, at);
  } else {
    fmt::print(stderr, "counter_demo: `{} kill {}` failed (at i={})\n", testbed, s.kill_node, at);
  }
  std::fflush(stdout);
}

double ms(std::int64_t us) {
  return static_cast<double>(us) / 1000.0;
}

std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  // Nearest rank.
  auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(sorted.size()) + 0.999999);
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

int run(const settings& s) {
  if (s.kill_after && std::getenv("REDSYNC_TESTBED") == nullptr) {
    usage_error("--kill-node-after needs REDSYNC_TESTBED=<path to scripts/testbed>");
  }
  if (s.use_lock && !nodes_reachable(s)) return 1;

  char path[] = "/tmp/counter_demo.XXXXXX";
  const int counter_fd = mkstemp(path);
  if (counter_fd < 0) throw std::runtime_error(fmt::format("mkstemp: {}", std::strerror(errno)));
  // Unlinked at once: the workers inherit the descriptor, and nothing is
  // left behind however the run ends.
  unlink(path);
  if (const std::string zero = fmt::format("{:>{}}", 0, counter_width);
      write(counter_fd, zero.data(), zero.size()) != static_cast<ssize_t>(zero.size())) {
    throw std::runtime_error("cannot initialise the counter file");
  }

  const long expected = static_cast<long>(s.workers) * s.increments;
  fmt::print("{} worker processes x {} increments of a counter in a file, {}\n", s.workers, s.increments,
             s.use_lock ? fmt::format("under the lock \"{}\" on {} nodes", lock_name, s.nodes.size())
                        : std::string("WITHOUT a lock"));
  std::fflush(stdout);  // or each child would print the parent's buffer again

  // Fork the workers, each with a pipe for its report.
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int w = 0; w < s.workers; ++w) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
      close(fds[0]);
      for (int earlier : pipes) close(earlier);
      int code = 1;
      try {
        code = run_worker(s, counter_fd, fds[1]);
      } catch (const std::exception& e) {
        fmt::print(stderr, "worker {}: {}\n", getpid(), e.what());
      }
      std::fflush(nullptr);
      _exit(code);  // not exit(): the parent's atexit handlers are not ours
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }

  // Collect the reports while watching the counter for the moment to kill a node.
  const auto start = steady_clock::now();
  std::vector<std::string> received(pipes.size());
  std::vector<pollfd> open_pipes;
  for (int fd : pipes) open_pipes.push_back({fd, POLLIN, 0});
  bool killed = false;
  while (!open_pipes.empty()) {
    if (s.kill_after && !killed) {
      if (const long now = read_counter(counter_fd); now >= *s.kill_after) {
        kill_node(s, now);
        killed = true;
      }
    }
    if (poll(open_pipes.data(), open_pipes.size(), 1) < 0 && errno != EINTR) {
      throw std::runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    }
    for (auto it = open_pipes.begin(); it != open_pipes.end();) {
      if (it->revents == 0) {
        ++it;
        continue;
      }
      char buf[4096];
      const ssize_t n = read(it->fd, buf, sizeof buf);
      const auto w = static_cast<std::size_t>(std::find(pipes.begin(), pipes.end(), it->fd) - pipes.begin());
      if (n > 0) {
        received[w].append(buf, static_cast<std::size_t>(n));
        ++it;
      } else if (n < 0 && errno == EINTR) {
        ++it;
      } else {  // end of file (or an error): this worker is done
        close(it->fd);
        it = open_pipes.erase(it);
      }
    }
  }
  const auto wall = steady_clock::now() - start;

  bool workers_ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    workers_ok = workers_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  // Merge the reports.
  worker_report total;
  std::vector<std::int64_t> latencies;
  for (const auto& data : received) {
    worker_report r;
    if (data.size() < sizeof r) {
      workers_ok = false;
      continue;
    }
    std::memcpy(&r, data.data(), sizeof r);
    const std::size_t count = (data.size() - sizeof r) / sizeof(std::int64_t);
    const std::size_t base = latencies.size();
    latencies.resize(base + count);
    std::memcpy(latencies.data() + base, data.data() + sizeof r, count * sizeof(std::int64_t));
    total.acquisitions += r.acquisitions;
    total.failed_acquisitions += r.failed_acquisitions;
    total.failed_releases += r.failed_releases;
  }
  std::sort(latencies.begin(), latencies.end());

  const long final_count = read_counter(counter_fd);
  close(counter_fd);

  if (s.kill_after && !killed) {
    fmt::print("node {} was not killed: the run ended before i={}\n", s.kill_node, *s.kill_after);
  }
  fmt::print("final count {} / expected {}{}\n", final_count, expected,
             final_count < expected   ? fmt::format("  <- {} updates LOST", expected - final_count)
             : final_count > expected ? std::string("  <- the counter file is corrupt")
                                      : std::string());
  if (s.use_lock) {
    fmt::print("acquire latency over {} locks: p50 {:.2f} ms, p90 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms\n",
               latencies.size(), ms(percentile(latencies, 50)), ms(percentile(latencies, 90)),
               ms(percentile(latencies, 99)), ms(latencies.empty() ? 0 : latencies.back()));
    fmt::print("failed acquisitions {}, failed releases {}\n", total.failed_acquisitions,
               total.failed_releases);
  }
  fmt::print("wall time {:.2f} s ({:.0f} increments/s)\n", std::chrono::duration<double>(wall).count(),
             static_cast<double>(final_count) / std::chrono::duration<double>(wall).count());
  return final_count == expected && workers_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try { return run(parse_args(argc, argv)); } catch (const std::exception& e) {
  fmt::print(stderr, "counter_demo: {}\n", e.what());
  return 1;
}
