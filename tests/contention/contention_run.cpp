#include "contention_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace redsync::contention {
namespace {

using clock_type = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

// The processes of one run; whatever is still running when this goes
// (an exception, a hang) is killed and reaped.
struct process_group {
  std::vector<pid_t> pids;
  std::vector<int> status;  // waitpid status, -1 while running
  std::vector<int> to_child, from_child;

  ~process_group() {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (status[i] == -1) {
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
      }
    }
    for (int fd : to_child)
      if (fd >= 0) ::close(fd);
    for (int fd : from_child)
      if (fd >= 0) ::close(fd);
  }

  void spawn(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // A test ignores SIGPIPE (tests/support/main.cpp): the child starts as a shell would start it.
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    std::vector<std::string> store = args;
    std::vector<char*> argv;
    for (auto& a : store) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
    }
    pids.push_back(pid);
    status.push_back(-1);
    to_child.push_back(in[1]);
    from_child.push_back(out[0]);
  }

  // Reaps what has exited; true when every process has.
  bool reap() {
    bool all = true;
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) continue;
      int st = 0;
      if (::waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        status[i] = st;
      } else {
        all = false;
      }
    }
    return all;
  }
};

std::string fmt_ready(std::size_t ready, std::size_t all, std::chrono::milliseconds bound) {
  return std::to_string(ready) + " of " + std::to_string(all) + " contenders were ready within " +
         std::to_string(bound.count()) + " ms";
}

// Waits until every process wrote its "ready" line.
void await_ready(process_group& g, std::chrono::milliseconds bound) {
  const auto deadline = clock_type::now() + bound;
  std::vector<std::string> seen(g.pids.size());
  std::size_t ready = 0;
  while (ready < g.pids.size()) {
    if (clock_type::now() >= deadline) throw std::runtime_error(fmt_ready(ready, g.pids.size(), bound));
    std::vector<pollfd> fds;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < g.pids.size(); ++i) {
      if (seen[i].find('\n') != std::string::npos) continue;
      fds.push_back({g.from_child[i], POLLIN, 0});
      which.push_back(i);
    }
    if (::poll(fds.data(), fds.size(), 20) < 0 && errno != EINTR)
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      char buf[64];
      const ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      const std::size_t i = which[k];
      if (n <= 0) throw std::runtime_error("a contender exited before it was ready (see its stderr)");
      seen[i].append(buf, static_cast<std::size_t>(n));
      if (seen[i].find('\n') != std::string::npos) ++ready;
    }
  }
}

long read_counter(const std::string& path) {
  std::ifstream in(path);
  long v = 0;
  in >> v;
  return v;
}

void parse_report(const std::string& path, int process, run_outcome& o, bool& complete) {
  std::ifstream in(path);
  std::string line;
  bool done = false;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind;
    f >> kind;
    if (kind == "grant") {
      grant g;
      g.process = process;
      f >> g.want >> g.acquired >> g.released;
      o.grants.push_back(g);
    } else if (kind == "failure") {
      failure e;
      e.process = process;
      f >> e.error >> e.elapsed_ns;
      std::getline(f, e.detail);
      o.failures.push_back(e);
    } else if (kind == "unfinished") {
      std::int64_t want = 0, stop = 0;
      f >> want >> stop;
      o.unfinished_waits.push_back(stop - want);
      o.unfinished_since.push_back(want);
    } else if (kind == "done") {
      int c = 0;
      f >> c;
      complete = c == 1;
      done = true;
    }
  }
  if (!done) o.problems.push_back("process " + std::to_string(process) + " left no complete report");
}

summary summarize(std::vector<double> us) {
  summary s;
  s.n = us.size();
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  auto rank = [&](double p) {
    const auto r = static_cast<std::size_t>(std::ceil(p * static_cast<double>(us.size())));
    return us[std::clamp<std::size_t>(r, 1, us.size()) - 1];
  };
  s.p50_us = rank(0.5);
  s.p99_us = rank(0.99);
  s.max_us = us.back();
  return s;
}

}  // namespace

run_outcome run(const run_settings& s, const std::function<void(long)>& on_progress) {
  char tmpl[] = "/tmp/redsync-contention.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  const std::string dir = tmpl;
  struct remove_dir {
    std::string path;
    ~remove_dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } cleanup{dir};
  const std::string counter = dir + "/counter";
  std::ofstream(counter) << std::string(19, ' ') << "0";

  process_group g;
  for (int p = 0; p < s.processes; ++p) {
    g.spawn({s.program,
             "--nodes",
             joined(s.nodes),
             "--name",
             s.name,
             "--counter",
             counter,
             "--out",
             dir + "/report-" + std::to_string(p),
             "--cycles",
             std::to_string(s.cycles),
             "--hold-us",
             std::to_string(s.hold.count()),
             "--retry",
             s.short_retry ? "short" : "default",
             "--expiry-ms",
             std::to_string(s.expiry.count()),
             "--call-deadline-ms",
             std::to_string(s.call_deadline.count()),
             "--restart-guard",
             s.restart_guard ? "on" : "off"});
  }
  await_ready(g, s.startup_bound);

  run_outcome o;
  // A little ahead, so every process has read its start line by then.
  o.start = now_ns() + 50'000'000;
  const auto span = s.cycles > 0 ? s.give_up : s.window;
  const std::int64_t stop = o.start + std::chrono::nanoseconds(span).count();
  const std::string go = std::to_string(o.start) + " " + std::to_string(stop) + "\n";
  for (int fd : g.to_child) {
    if (::write(fd, go.data(), go.size()) != static_cast<ssize_t>(go.size()))
      throw std::runtime_error("cannot write a contender's start line");
  }

  // Every call started before `stop` ends by its deadline; unlock and
  // shutdown take a few seconds at most.
  const auto bound = clock_type::now() + span + s.call_deadline + std::chrono::seconds(15);
  while (!g.reap()) {
    if (on_progress) on_progress(read_counter(counter));
    if (clock_type::now() > bound) {
      for (std::size_t i = 0; i < g.pids.size(); ++i) {
        if (g.status[i] == -1) {
          o.problems.push_back("process " + std::to_string(i) + " did not end in time and was killed");
          ::kill(g.pids[i], SIGKILL);
          ::waitpid(g.pids[i], &g.status[i], 0);
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  o.end = stop;

  o.acquisitions.assign(static_cast<std::size_t>(s.processes), 0);
  o.completed.assign(static_cast<std::size_t>(s.processes), false);
  for (int p = 0; p < s.processes; ++p) {
    const int st = g.status[static_cast<std::size_t>(p)];
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      o.problems.push_back(
          "process " + std::to_string(p) + " ended with status " +
          (WIFSIGNALED(st) ? "signal " + std::to_string(WTERMSIG(st)) : std::to_string(WEXITSTATUS(st))));
    }
    bool complete = false;
    parse_report(dir + "/report-" + std::to_string(p), p, o, complete);
    o.completed[static_cast<std::size_t>(p)] = complete;
  }
  std::sort(o.grants.begin(), o.grants.end(),
            [](const grant& a, const grant& b) { return a.acquired < b.acquired; });
  for (const auto& gr : o.grants) ++o.acquisitions[static_cast<std::size_t>(gr.process)];
  o.counter = read_counter(counter);
  if (s.cycles > 0) {
    // Rates are over the time the lock was wanted: up to the last release,
    // or to the give-up time when a wait was cut there.
    o.end = o.unfinished_waits.empty() ? o.start : stop;
    for (const auto& gr : o.grants) o.end = std::max(o.end, gr.released);
  }

  if (s.cycles > 0) {
    // Fairness is judged while everyone still wants the lock: up to the
    // moment the first process was done.
    std::vector<std::int64_t> last(static_cast<std::size_t>(s.processes), 0);
    for (const auto& gr : o.grants)
      last[static_cast<std::size_t>(gr.process)] =
          std::max(last[static_cast<std::size_t>(gr.process)], gr.released);
    o.fairness_end = o.end;
    for (int p = 0; p < s.processes; ++p)
      if (o.completed[static_cast<std::size_t>(p)])
        o.fairness_end = std::min(o.fairness_end, last[static_cast<std::size_t>(p)]);
  } else {
    o.fairness_end = stop;
  }
  return o;
}

figures measure(const run_outcome& o) {
  figures f;
  f.processes = static_cast<int>(o.acquisitions.size());
  f.acquisitions = static_cast<std::int64_t>(o.grants.size());
  f.seconds = static_cast<double>(o.end - o.start) / 1e9;
  std::vector<double> waits, handover_waits;
  // The earliest moment someone who had not yet been served wanted the lock:
  // for grant i, the earliest want among grant i, the later grants and the
  // waits the end cut.
  std::int64_t pending_want = INT64_MAX;
  for (auto w : o.unfinished_since) pending_want = std::min(pending_want, w);
  std::vector<std::int64_t> earliest_want(o.grants.size());
  for (std::size_t i = o.grants.size(); i-- > 0;) {
    pending_want = std::min(pending_want, o.grants[i].want);
    earliest_want[i] = pending_want;
  }
  std::int64_t busy_until = o.start;  // the latest release so far
  std::int64_t longest_gap = 0;
  for (std::size_t i = 0; i < o.grants.size(); ++i) {
    const auto& g = o.grants[i];
    waits.push_back(static_cast<double>(g.acquired - g.want) / 1e3);
    if (g.acquired < busy_until && i > 0) ++f.overlaps;
    // Free from the last release (or the start) until this grant, and
    // wanted by someone since earliest_want[i].
    const std::int64_t free_from = std::max(busy_until, earliest_want[i]);
    longest_gap = std::max(longest_gap, g.acquired - free_from);
    if (i > 0 && g.process != o.grants[i - 1].process) {
      ++f.handovers;
      handover_waits.push_back(static_cast<double>(g.acquired - o.grants[i - 1].released) / 1e3);
    }
    busy_until = std::max(busy_until, g.released);
  }
  f.wait = summarize(waits);
  for (std::size_t k = 0; k < o.unfinished_waits.size(); ++k) {
    // Cut, not done: they count in the maximum only.
    f.wait.max_us = std::max(f.wait.max_us, static_cast<double>(o.unfinished_waits[k]) / 1e3);
    const std::int64_t cut = o.unfinished_since[k] + o.unfinished_waits[k];
    longest_gap = std::max(longest_gap, cut - std::max(busy_until, o.unfinished_since[k]));
  }
  f.handover_wait = summarize(handover_waits);
  f.longest_stall_ms = static_cast<double>(longest_gap) / 1e6;
  f.acquisitions_per_s = f.seconds > 0 ? static_cast<double>(f.acquisitions) / f.seconds : 0;
  f.handovers_per_s = f.seconds > 0 ? static_cast<double>(f.handovers) / f.seconds : 0;

  std::vector<int> share(o.acquisitions.size(), 0);
  for (const auto& g : o.grants)
    if (g.acquired <= o.fairness_end) ++share[static_cast<std::size_t>(g.process)];
  const fairness fair = fairness_of(share);
  f.jain = fair.jain;
  f.min_share = fair.min_share;
  f.max_share = fair.max_share;
  f.failures = o.failures.size();
  for (bool c : o.completed) f.incomplete += c ? 0 : 1;
  return f;
}

fairness fairness_of(const std::vector<int>& acquisitions) {
  fairness f;
  double sum = 0, squares = 0;
  for (const int x : acquisitions) sum += x, squares += static_cast<double>(x) * x;
  f.jain = squares > 0 ? sum * sum / (static_cast<double>(acquisitions.size()) * squares) : 0;
  if (!acquisitions.empty()) {
    f.min_share = *std::min_element(acquisitions.begin(), acquisitions.end());
    f.max_share = *std::max_element(acquisitions.begin(), acquisitions.end());
  }
  return f;
}

std::string describe(const figures& f) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%d processes, %lld acquisitions in %.2f s (%lld hand-overs, %.0f/s); wait p50 %.2f ms, p99 "
                "%.2f ms, max %.2f ms; hand-over wait p50 %.2f ms, max %.2f ms; longest stall %.0f ms; Jain "
                "%.3f (shares %d..%d); %zu failed calls, %d incomplete, %d overlaps",
                f.processes, static_cast<long long>(f.acquisitions), f.seconds,
                static_cast<long long>(f.handovers), f.handovers_per_s, f.wait.p50_us / 1e3,
                f.wait.p99_us / 1e3, f.wait.max_us / 1e3, f.handover_wait.p50_us / 1e3,
                f.handover_wait.max_us / 1e3, f.longest_stall_ms, f.jain, f.min_share, f.max_share,
                f.failures, f.incomplete, f.overlaps);
  return buf;
}

}  // namespace redsync::contention
