// One contender process: takes one shared lock name again and again, each
// time adding one to a counter kept in a plain file the unsafe way (read,
// hold, write back), and records when it started to want the lock, when it
// got it and when it let it go. Run by contention_run.cpp (the contention
// test and the bench's contention section), several at once.
//
//   contender --nodes URI,... --name NAME --counter FILE --out FILE
//             [--cycles M] [--hold-us H] [--retry short|default]
//             [--expiry-ms E] [--call-deadline-ms D] [--restart-guard on|off]
//
// Protocol with the parent, so that N processes start together however long
// each takes to start up on a loaded machine: after connecting (a warm-up
// lock on a name of its own) the contender writes "ready\n" to stdout, then
// reads one line "START_NS STOP_NS\n" from stdin (CLOCK_MONOTONIC, the
// steady clock of every process on the machine). With --cycles M it makes M
// acquisitions, starting no lock call after STOP_NS; without, it runs cycles
// until STOP_NS (a lock call cut by STOP_NS is an unfinished wait).
//
// The --out file, one record per line (times in ns):
//   grant WANT ACQUIRED RELEASED     want = the first lock call for it began
//   failure ERROR ELAPSED DETAIL...  a lock call that failed (it is retried)
//   unfinished WANT STOP             still waiting when STOP_NS came
//   done COMPLETE                    1 when all M cycles were made
// Exit status 0, or 2 for a usage or set-up error.
#include <redsync/redsync.hpp>

#include <fmt/core.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

std::int64_t ns(clock_type::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

clock_type::time_point at_ns(std::int64_t v) {
  return clock_type::time_point(
      std::chrono::duration_cast<clock_type::duration>(std::chrono::nanoseconds(v)));
}

struct settings {
  std::vector<std::string> nodes;
  std::string name;
  std::string counter;
  std::string out;
  long cycles = 0;
  long hold_us = 0;
  bool short_retry = false;
  long expiry_ms = 8000;
  long call_deadline_ms = 10000;
  bool restart_guard = true;
};

settings parse(int argc, char** argv) {
  std::map<std::string, std::string> v;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || i + 1 >= argc) throw std::invalid_argument("bad argument \"" + k + "\"");
    v[k.substr(2)] = argv[++i];
  }
  auto need = [&](const char* k) {
    auto it = v.find(k);
    if (it == v.end()) throw std::invalid_argument(std::string("missing --") + k);
    return it->second;
  };
  auto number = [&](const char* k, long fallback) {
    auto it = v.find(k);
    if (it == v.end()) return fallback;
    std::size_t used = 0;
    const long n = std::stol(it->second, &used);
    if (used != it->second.size() || n < 0)
      throw std::invalid_argument(std::string("--") + k + ": not a count");
    return n;
  };
  settings s;
  s.nodes = redsync::parse_members(need("nodes"));
  s.name = need("name");
  s.counter = need("counter");
  s.out = need("out");
  s.cycles = number("cycles", 0);
  s.hold_us = number("hold-us", 0);
  s.expiry_ms = number("expiry-ms", 8000);
  s.call_deadline_ms = number("call-deadline-ms", 10000);
  const std::string retry = v.count("retry") ? v["retry"] : "default";
  if (retry != "short" && retry != "default") throw std::invalid_argument("--retry: short or default");
  s.short_retry = retry == "short";
  const std::string guard = v.count("restart-guard") ? v["restart-guard"] : "on";
  if (guard != "on" && guard != "off") throw std::invalid_argument("--restart-guard: on or off");
  s.restart_guard = guard == "on";
  return s;
}

// The shared resource: a decimal number at offset 0 of a file, always
// written at the same width. Not atomic on purpose: two processes inside at
// once lose an increment, so the final count proves mutual exclusion.
class counter_file {
 public:
  explicit counter_file(const std::string& path) : fd_(::open(path.c_str(), O_RDWR)) {
    if (fd_ < 0) throw std::runtime_error(fmt::format("open {}: {}", path, std::strerror(errno)));
  }
  ~counter_file() { ::close(fd_); }
  counter_file(const counter_file&) = delete;
  counter_file& operator=(const counter_file&) = delete;

  void increment(std::chrono::microseconds hold) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    const long value = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
    if (hold.count() > 0) std::this_thread::sleep_for(hold);
    const std::string text = fmt::format("{:>20}", value + 1);
    if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
      throw std::runtime_error(fmt::format("write to the counter: {}", std::strerror(errno)));
  }

 private:
  int fd_;
};

int run(const settings& s) {
  redsync::redsync_options ro;
  // On by default, as users run it: the warm-up below waits out the window
  // of nodes started moments before.
  ro.restart_guard = s.restart_guard;
  redsync::Redsync rs(s.nodes, ro);
  redsync::mutex_options mo{
      .expiry = std::chrono::milliseconds(s.expiry_ms),
      // A sustained waiter: the deadline bounds each call, not a count of tries.
      .tries = 1'000'000,
  };
  if (s.short_retry) {
    // Short and random, as users pick (and as examples/counter_demo does).
    mo.retry_delay = [](int) {
      thread_local std::mt19937 rng{std::random_device{}()};
      return std::chrono::milliseconds(std::uniform_int_distribution<int>(1, 3)(rng));
    };
  }

  // Connect (and wait out a brand-new node's repair) on a name of our own.
  {
    auto warm = rs.new_mutex(fmt::format("{}:warm:{}", s.name, ::getpid()), mo);
    auto r = warm.lock(redsync::context::timeout(std::chrono::seconds(20)));
    if (!r) throw std::runtime_error("warm-up lock: " + r.describe());
    (void)warm.unlock(redsync::context::timeout(std::chrono::seconds(5)));
  }
  auto m = rs.new_mutex(s.name, mo);
  counter_file counter(s.counter);
  std::FILE* out = std::fopen(s.out.c_str(), "w");
  if (out == nullptr) throw std::runtime_error(fmt::format("open {}: {}", s.out, std::strerror(errno)));

  std::cout << "ready" << std::endl;
  std::int64_t start_ns = 0;
  std::int64_t stop_ns = 0;
  if (!(std::cin >> start_ns >> stop_ns)) throw std::runtime_error("no start line from the parent");
  const auto stop = at_ns(stop_ns);
  std::this_thread::sleep_until(at_ns(start_ns));

  long made = 0;
  bool complete = false;
  while (true) {
    if (s.cycles > 0 && made == s.cycles) {
      complete = true;
      break;
    }
    const auto want = clock_type::now();
    if (want >= stop) break;
    bool acquired = false;
    while (!acquired) {
      const auto call_start = clock_type::now();
      const auto deadline = std::min(stop, call_start + std::chrono::milliseconds(s.call_deadline_ms));
      if (call_start >= stop) break;
      auto r = m.lock(redsync::context::until(deadline));
      if (r) {
        acquired = true;
        break;
      }
      const auto now = clock_type::now();
      // The window's end cut a bench run's wait: not a failure of the lock.
      if (s.cycles == 0 && r.error == redsync::errc::deadline_exceeded && now >= stop) break;
      std::string detail = r.describe();
      for (auto& c : detail)
        if (c == '\n') c = ' ';
      fmt::print(out, "failure {} {} {}\n", redsync::to_string(static_cast<redsync::errc>(r.error.value())),
                 ns(now) - ns(call_start), detail);
    }
    if (!acquired) {
      fmt::print(out, "unfinished {} {}\n", ns(want), ns(clock_type::now()));
      break;
    }
    const auto got = clock_type::now();
    counter.increment(std::chrono::microseconds(s.hold_us));
    const auto released = clock_type::now();
    ++made;
    fmt::print(out, "grant {} {} {}\n", ns(want), ns(got), ns(released));
    if (auto u = m.unlock(redsync::context::timeout(std::chrono::seconds(5))); !u) {
      fmt::print(out, "failure unlock:{} 0 {}\n",
                 redsync::to_string(static_cast<redsync::errc>(u.error.value())), u.describe());
    }
  }
  fmt::print(out, "done {}\n", complete ? 1 : 0);
  std::fclose(out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    fmt::print(stderr, "contender {}: {}\n", ::getpid(), e.what());
    return 2;
  }
}
