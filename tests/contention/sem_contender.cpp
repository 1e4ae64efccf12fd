// One process contending for the permits of a counting semaphore
// (include/redsync/semaphore.hpp), for semaphore_contention_test.cpp and the
// bench's semaphore section (bench/semaphore.cpp).
//
//   sem_contender --nodes URI,... --name NAME --permits K --cycles M --out FILE
//                 [--start-ns T --end-ns T]
//
// Makes M acquisitions, each held about a millisecond, and appends to FILE
// one line per acquisition, times in ns of the steady clock (CLOCK_MONOTONIC,
// shared by every process on the machine), ENTER and LEAVE taken strictly
// inside the hold (after acquire returned, before release was sent), WANT
// when the acquire call began, PID this process's id (getpid(), the pid
// its parent got from fork, as exec keeps it), so that acquisitions can be
// counted per process (the bench's Jain index):
//   grant SLOT TOKEN ENTER LEAVE WANT PID
// or, on the first failure, `failure DESCRIPTION` and exit 1. Each line is
// one write(2) below PIPE_BUF on an O_APPEND file, so lines of concurrent
// processes never interleave.
//
// Window mode (the bench): --cycles 0 with --start-ns and --end-ns; waits
// until start, acquires with the library's default retry delay until end,
// and a wait that the end cuts is written `cut WANT` (not a failure).
#include <redsync/redsync.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void append(int fd, const std::string& line) {
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("write to the --out file failed");
}

int run(int argc, char** argv) {
  std::map<std::string, std::string> v;
  for (int i = 1; i + 1 < argc; i += 2) v[argv[i]] = argv[i + 1];
  for (const char* k : {"--nodes", "--name", "--permits", "--cycles", "--out"})
    if (v.count(k) == 0) throw std::invalid_argument(std::string("missing ") + k);
  const int fd = ::open(v["--out"].c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd < 0) throw std::runtime_error("cannot open --out " + v["--out"]);
  redsync::Redsync rs(redsync::parse_members(v["--nodes"]), {.restart_guard = false});
  std::mt19937 rng(std::random_device{}());
  const int cycles = std::stoi(v["--cycles"]);
  // Window mode measures what users get: the default retry delay.
  const bool window = cycles == 0;
  redsync::semaphore_options options{.expiry = std::chrono::seconds(8), .tries = 100000};
  if (!window)
    options.retry_delay = [&rng](int) {
      return std::chrono::milliseconds(std::uniform_int_distribution<int>(2, 10)(rng));
    };
  auto sem = rs.new_semaphore(v["--name"], std::stoi(v["--permits"]), options);
  using clock = std::chrono::steady_clock;
  const clock::time_point end{std::chrono::nanoseconds(window ? std::stoll(v.at("--end-ns")) : 0)};
  if (window)
    std::this_thread::sleep_until(
        clock::time_point{std::chrono::nanoseconds(std::stoll(v.at("--start-ns")))});
  for (int c = 0; window ? clock::now() < end : c < cycles; ++c) {
    const std::int64_t want = now_ns();
    auto r = sem.acquire(window ? redsync::context::until(end)
                                : redsync::context::timeout(std::chrono::seconds(60)));
    if (window && r.outcome.is(redsync::errc::deadline_exceeded)) {
      append(fd, fmt::format("cut {}\n", want));
      break;
    }
    if (!r) {
      append(fd, "failure " + r.describe() + "\n");
      return 1;
    }
    const std::int64_t enter = now_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::int64_t leave = now_ns();
    if (auto u = r.permit.release(redsync::context::timeout(std::chrono::seconds(5))); !u) {
      append(fd, "failure release: " + u.describe() + "\n");
      return 1;
    }
    append(fd, fmt::format("grant {} {} {} {} {} {}\n", r.permit.slot(), r.permit.token().value, enter, leave,
                           want, ::getpid()));
  }
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sem_contender: %s\n", e.what());
    return 2;
  }
}
