// A chaos client: contends for a few lock names and records every call and
// every critical section in its history, for tests/chaos/checker.py.
//
//   chaos_client run --nodes URI,... --resource FILE --names a,b --history FILE
//                    --mode blocking|async|auto [--expiry MS] [--fail-fast]
//                    [--work MS] [--duration S] [--seed N] [--lock-timeout MS]
//                    [--unsafe-no-failover-check] [--min-work MS] [--trigger FILE]
//   chaos_client semaphore --nodes URI,... --resource FILE --names a,b,s/0,s/1
//                    --history FILE --semaphore s --permits K --async 0|1
//                    [--unsafe-majority-count-only] [--expiry MS] [--work MS]
//                    [--duration S] [--seed N] [--lock-timeout MS]
//   chaos_client rw --nodes URI,... --resource FILE --names a,b,rw --history FILE
//                    --rw NAME --role reader|writer --async 0|1 [--expiry MS]
//                    [--work MS] [--duration S] [--seed N] [--lock-timeout MS]
//   chaos_client touch --resource FILE --names a,b --history FILE [--work MS]
//
// `run` is a library client (blocking API, async API, or blocking with
// auto-extension and long sections). `semaphore` contends for a permit of a
// counting semaphore of K permits (blocking or future API); its sections
// use the resource's slot named "s/<permit slot>", so fencing is checked per
// slot. `--unsafe-majority-count-only` makes it the known-unsafe semaphore
// of the meta-test (lib/redlock/semaphore/semaphore_test_access.hpp), and
// `--unsafe-no-failover-check` turns off the failover check of cluster
// members for the cluster meta-test (lib/redlock/trust/failover_check_test_access.hpp).
// That meta-test's holder takes sections of at least `--min-work` (cut short
// at the run's end), and its stale client (`--trigger FILE`), after one
// first call, makes each call only when the nemesis raises the number in
// FILE, and no command between: its slot maps are as old as its last call.
// `rw` takes the read-write lock NAME (an RWMutex) as a reader or as a
// writer, over the nodes it is given: a writer runs its sections on the
// resource's slot NAME (fenced by its token), a reader holds for up to
// `--work` without touching the resource (readers share it). The RW
// meta-test's broken readers are given a minority of the nodes (2 of 5):
// their quorum, a majority of those, is not a majority of all.
// `touch` is the command that
// `redsync lock NAME -- chaos_client touch ...` runs: one section with the
// token the tool passes in REDSYNC_FENCING_TOKEN.
#include <redsync/redsync.hpp>

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "history.hpp"
#include "redlock/semaphore/semaphore_test_access.hpp"
#include "redlock/trust/failover_check_test_access.hpp"
#include "section.hpp"
#include "shared_resource.hpp"

using namespace std::chrono_literals;
using redsync::chaos::history;
using redsync::chaos::json_string;
using redsync::chaos::to_ns;

namespace {

struct arguments {
  std::map<std::string, std::string> values;
  bool has(const std::string& k) const { return values.count(k) != 0; }
  std::string get(const std::string& k, const std::string& fallback = {}) const {
    auto it = values.find(k);
    if (it != values.end()) return it->second;
    if (fallback.empty()) throw std::invalid_argument("missing --" + k);
    return fallback;
  }
  long number(const std::string& k, long fallback) const {
    if (!has(k)) return fallback;
    const std::string& v = values.at(k);
    std::size_t used = 0;
    const long n = std::stol(v, &used);
    if (used != v.size() || n < 0) throw std::invalid_argument("--" + k + ": not a count: \"" + v + "\"");
    return n;
  }
};

arguments parse(int argc, char** argv) {
  arguments a;
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0) throw std::invalid_argument("unexpected argument \"" + k + "\"");
    k = k.substr(2);
    if (k == "fail-fast" || k == "unsafe-majority-count-only" || k == "unsafe-no-failover-check") {
      a.values[k] = "1";
    } else if (i + 1 < argc) {
      a.values[k] = argv[++i];
    } else {
      throw std::invalid_argument("--" + k + " needs a value");
    }
  }
  return a;
}

// The number in the file (0 while it is missing or being replaced).
long read_trigger(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return 0;
  long n = 0;
  if (std::fscanf(f, "%ld", &n) != 1) n = 0;
  std::fclose(f);
  return n;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const auto comma = s.find(',', start);
    const auto end = comma == std::string::npos ? s.size() : comma;
    if (end > start) out.push_back(s.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// What the checker needs of a result: the error and each node's status.
std::string result_fields(const redsync::result& r) {
  std::string nodes;
  for (const auto& n : r.nodes) {
    if (!nodes.empty()) nodes += ',';
    nodes += json_string(redsync::to_string(n.status));
  }
  return fmt::format(R"("ok":{},"error":{},"attempts":{},"nodes":[{}])", static_cast<bool>(r),
                     json_string(r ? "" : r.error.message()), r.attempts, nodes);
}

redsync::result wait_for(std::future<redsync::result> f) {
  return f.get();
}

int run_client(const arguments& a) {
  const auto names = split(a.get("names"));
  const std::string mode = a.get("mode");
  if (mode != "blocking" && mode != "async" && mode != "auto")
    throw std::invalid_argument("--mode: expected blocking, async or auto, got \"" + mode + "\"");
  const auto expiry = std::chrono::milliseconds(a.number("expiry", 1000));
  const auto work = std::chrono::milliseconds(a.number("work", mode == "auto" ? expiry.count() : 5));
  const auto min_work = std::chrono::milliseconds(a.number("min-work", 0));
  const std::string trigger = a.has("trigger") ? a.get("trigger") : std::string();
  long triggered = trigger.empty() ? 0 : read_trigger(trigger);
  bool first_call = true;
  const auto duration = std::chrono::seconds(a.number("duration", 60));
  const auto lock_timeout = std::chrono::milliseconds(a.number("lock-timeout", 3000));
  std::mt19937_64 rng(static_cast<std::uint64_t>(a.number("seed", ::getpid())));

  // Before the first Redsync: its loop thread reads the switch.
  const bool unchecked = a.has("unsafe-no-failover-check");
  if (unchecked) redsync::detail::failover_check_test_access::disable();

  redsync::chaos::shared_resource resource(a.get("resource"));
  history h(a.get("history"), a.get("client", mode));
  redsync::redsync_options rso{.connect_timeout = 300ms};
  // The stale client's log (logs/<client>.log) says what each of its few
  // calls met: the history keeps only a call's last attempt.
  if (!trigger.empty())
    rso.log = [](redsync::log_level l, std::string_view msg) {
      fmt::print(stderr, "{} {} {}\n", to_ns(std::chrono::steady_clock::now()), redsync::to_string(l), msg);
    };
  redsync::Redsync rs(redsync::parse_members(a.get("nodes")), rso);

  redsync::mutex_options options{
      .expiry = expiry, .fail_fast = a.has("fail-fast"), .auto_extend = mode == "auto"};
  std::vector<redsync::Mutex> mutexes;
  for (const auto& n : names) mutexes.push_back(rs.new_mutex(n, options));

  h.record(
      "start",
      fmt::format(
          R"("mode":"{}","expiry_ms":{},"work_ms":{},"lock_timeout_ms":{},"timeout_ms":{},"fail_fast":{},)"
          R"("failover_check":{})",
          mode, expiry.count(), work.count(), lock_timeout.count(),
          static_cast<long long>(static_cast<double>(expiry.count()) * options.timeout_factor),
          options.fail_fast, !unchecked));
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    if (!trigger.empty() && !first_call) {
      // Idle, sending nothing, until the nemesis says so.
      while (read_trigger(trigger) <= triggered && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(2ms);
      if (std::chrono::steady_clock::now() >= end) break;
      triggered = read_trigger(trigger);
    }
    first_call = false;
    const std::size_t slot = std::uniform_int_distribution<std::size_t>(0, names.size() - 1)(rng);
    auto& m = mutexes[slot];
    const auto ctx = redsync::context::timeout(lock_timeout);
    const auto start = std::chrono::steady_clock::now();
    // Recorded before the call, so a call that never returns is seen.
    h.record("lock_begin", fmt::format(R"("name":{},"start":{},"deadline":{})", json_string(names[slot]),
                                       to_ns(start), to_ns(ctx.deadline)));
    redsync::result r = mode == "async" ? wait_for(m.lock_future(ctx)) : m.lock(ctx);
    const auto stop = std::chrono::steady_clock::now();
    if (!trigger.empty() && !r) fmt::print(stderr, "{} lock failed: {}\n", to_ns(stop), r.describe());
    h.record("lock", fmt::format(R"("name":{},"start":{},"end":{},"deadline":{},"token":{},"until":{},{})",
                                 json_string(names[slot]), to_ns(start), to_ns(stop), to_ns(ctx.deadline),
                                 r ? m.token().value : 0, r ? to_ns(m.until()) : 0, result_fields(r)));
    if (!r) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(10, 100)(rng)));
      continue;
    }
    // A holder acts only with time left on its validity, as the README asks.
    if (m.until() - std::chrono::steady_clock::now() > work + expiry / 10 || mode == "auto") {
      redsync::chaos::section_plan plan{
          .slot = slot,
          .name = names[slot],
          .token = m.token().value,
          .until_ns = to_ns(m.until()),
          .work = std::chrono::milliseconds(
              std::uniform_int_distribution<long>(std::min(min_work, work).count(), work.count())(rng)),
      };
      if (min_work.count() > 0)
        plan.work = std::clamp(
            std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()),
            0ms, plan.work);
      if (mode == "auto") {
        plan.still_held = [&m] { return m.held(); };
        plan.until_at_leave = [&m] { return to_ns(m.until()); };
      }
      redsync::chaos::run_section(resource, h, plan);
    } else {
      h.record("late", fmt::format(R"("name":{},"token":{})", json_string(names[slot]), m.token().value));
    }
    const auto u_start = std::chrono::steady_clock::now();
    h.record("unlock_begin",
             fmt::format(R"("name":{},"start":{})", json_string(names[slot]), to_ns(u_start)));
    redsync::result u = mode == "async" ? wait_for(m.unlock_future()) : m.unlock(redsync::context{});
    h.record("unlock", fmt::format(R"("name":{},"start":{},"end":{},"token":{},{})", json_string(names[slot]),
                                   to_ns(u_start), to_ns(std::chrono::steady_clock::now()), m.token().value,
                                   result_fields(u)));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 20)(rng)));
  }
  h.record("stop", "");
  return 0;
}

std::size_t index_of(const std::vector<std::string>& names, const std::string& name) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return i;
  throw std::invalid_argument("not in --names: " + name);
}

int run_semaphore_client(const arguments& a) {
  const auto names = split(a.get("names"));
  const std::string name = a.get("semaphore");
  const int k = static_cast<int>(a.number("permits", 2));
  const bool async = a.number("async", 0) != 0;
  const bool unsafe = a.has("unsafe-majority-count-only");
  const auto expiry = std::chrono::milliseconds(a.number("expiry", 1000));
  const auto work = std::chrono::milliseconds(a.number("work", 5));
  const auto duration = std::chrono::seconds(a.number("duration", 60));
  const auto lock_timeout = std::chrono::milliseconds(a.number("lock-timeout", 3000));
  std::mt19937_64 rng(static_cast<std::uint64_t>(a.number("seed", ::getpid())));
  // The resource's slot of each permit slot (checked here, before any call).
  std::vector<std::size_t> resource_slot;
  for (int s = 0; s < k; ++s) resource_slot.push_back(index_of(names, fmt::format("{}/{}", name, s)));

  redsync::chaos::shared_resource resource(a.get("resource"));
  history h(a.get("history"), a.get("client", "semaphore"));
  // The meta-test restarts no node, and the restart guard's first windows
  // (every node is new) would take most of its short run.
  redsync::Redsync rs(redsync::parse_members(a.get("nodes")),
                      redsync::redsync_options{.connect_timeout = 300ms, .restart_guard = !unsafe});
  const redsync::semaphore_options options{.expiry = expiry};
  redsync::Semaphore sem = unsafe ? redsync::detail::semaphore_test_access::make_unsafe(
                                        rs, name, k, options, {.quorum = rs.quorum(), .count_only = true})
                                  : rs.new_semaphore(name, k, options);

  h.record("start",
           fmt::format(R"("mode":"semaphore","async":{},"permits":{},"quorum":{},"unsafe":{},"expiry_ms":{},)"
                       R"("work_ms":{},"lock_timeout_ms":{},"timeout_ms":{})",
                       async, k, sem.quorum(), unsafe, expiry.count(), work.count(), lock_timeout.count(),
                       static_cast<long long>(static_cast<double>(expiry.count()) * options.timeout_factor)));
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    const auto ctx = redsync::context::timeout(lock_timeout);
    const auto start = std::chrono::steady_clock::now();
    h.record("acquire_begin", fmt::format(R"("name":{},"start":{},"deadline":{})", json_string(name),
                                          to_ns(start), to_ns(ctx.deadline)));
    redsync::acquire_result r = async ? sem.acquire_future(ctx).get() : sem.acquire(ctx);
    const auto stop = std::chrono::steady_clock::now();
    redsync::permit& p = r.permit;
    h.record("acquire",
             fmt::format(R"("name":{},"start":{},"end":{},"deadline":{},"slot":{},"token":{},"until":{},{})",
                         json_string(name), to_ns(start), to_ns(stop), to_ns(ctx.deadline), p.slot(),
                         p.token().value, r ? to_ns(p.until()) : 0, result_fields(r.outcome)));
    if (!r) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(10, 100)(rng)));
      continue;
    }
    const std::string section = fmt::format("{}/{}", name, p.slot());
    if (p.until() - std::chrono::steady_clock::now() > work + expiry / 10) {
      redsync::chaos::run_section(
          resource, h,
          {.slot = resource_slot.at(p.slot()),
           .name = section,
           .token = p.token().value,
           .until_ns = to_ns(p.until()),
           .work = std::chrono::milliseconds(std::uniform_int_distribution<long>(0, work.count())(rng))});
    } else {
      h.record("late", fmt::format(R"("name":{},"token":{})", json_string(section), p.token().value));
    }
    const auto u_start = std::chrono::steady_clock::now();
    h.record("release_begin", fmt::format(R"("name":{},"start":{})", json_string(name), to_ns(u_start)));
    redsync::result u = async ? p.release_future().get() : p.release(redsync::context{});
    h.record("release",
             fmt::format(R"("name":{},"start":{},"end":{},"token":{},{})", json_string(name), to_ns(u_start),
                         to_ns(std::chrono::steady_clock::now()), p.token().value, result_fields(u)));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 20)(rng)));
  }
  h.record("stop", "");
  return 0;
}

int run_rw_client(const arguments& a) {
  const auto names = split(a.get("names"));
  const std::string name = a.get("rw");
  const std::string role = a.get("role");
  if (role != "reader" && role != "writer")
    throw std::invalid_argument("--role: expected reader or writer, got \"" + role + "\"");
  const bool writer = role == "writer";
  const bool async = a.number("async", 0) != 0;
  const auto expiry = std::chrono::milliseconds(a.number("expiry", 1000));
  const auto work = std::chrono::milliseconds(a.number("work", 5));
  const auto duration = std::chrono::seconds(a.number("duration", 60));
  const auto lock_timeout = std::chrono::milliseconds(a.number("lock-timeout", 3000));
  std::mt19937_64 rng(static_cast<std::uint64_t>(a.number("seed", ::getpid())));
  const std::size_t resource_slot = index_of(names, name);  // checked before any call

  redsync::chaos::shared_resource resource(a.get("resource"));
  history h(a.get("history"), a.get("client", role));
  const auto members = redsync::parse_members(a.get("nodes"));
  redsync::Redsync rs(members, redsync::redsync_options{.connect_timeout = 300ms});
  const redsync::mutex_options options{.expiry = expiry};
  redsync::RWMutex rw = rs.new_rw_mutex(name, options);
  redsync::Mutex& m = writer ? rw.writer() : rw.reader();

  h.record("start",
           fmt::format(R"("mode":"rw","role":"{}","async":{},"nodes":{},"quorum":{},"expiry_ms":{},)"
                       R"("work_ms":{},"lock_timeout_ms":{},"timeout_ms":{})",
                       role, async, members.size(), rs.quorum(), expiry.count(), work.count(),
                       lock_timeout.count(),
                       static_cast<long long>(static_cast<double>(expiry.count()) * options.timeout_factor)));
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    const auto ctx = redsync::context::timeout(lock_timeout);
    const auto start = std::chrono::steady_clock::now();
    h.record("lock_begin", fmt::format(R"("name":{},"role":"{}","start":{},"deadline":{})", json_string(name),
                                       role, to_ns(start), to_ns(ctx.deadline)));
    redsync::result r = async ? wait_for(m.lock_future(ctx)) : m.lock(ctx);
    const auto stop = std::chrono::steady_clock::now();
    h.record(
        "lock",
        fmt::format(R"("name":{},"role":"{}","start":{},"end":{},"deadline":{},"token":{},"until":{},{})",
                    json_string(name), role, to_ns(start), to_ns(stop), to_ns(ctx.deadline),
                    r ? m.token().value : 0, r ? to_ns(m.until()) : 0, result_fields(r)));
    if (!r) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(10, 100)(rng)));
      continue;
    }
    const auto hold = std::chrono::milliseconds(std::uniform_int_distribution<long>(0, work.count())(rng));
    // A holder acts only with time left on its validity, as the README asks.
    if (m.until() - std::chrono::steady_clock::now() <= hold + expiry / 10) {
      h.record("late", fmt::format(R"("name":{},"token":{})", json_string(name), m.token().value));
    } else if (writer) {
      redsync::chaos::run_section(resource, h,
                                  {.slot = resource_slot,
                                   .name = name,
                                   .token = m.token().value,
                                   .until_ns = to_ns(m.until()),
                                   .work = hold});
    } else {
      std::this_thread::sleep_for(hold);
    }
    const auto u_start = std::chrono::steady_clock::now();
    h.record("unlock_begin",
             fmt::format(R"("name":{},"role":"{}","start":{})", json_string(name), role, to_ns(u_start)));
    redsync::result u = async ? wait_for(m.unlock_future()) : m.unlock(redsync::context{});
    h.record("unlock",
             fmt::format(R"("name":{},"role":"{}","start":{},"end":{},"token":{},{})", json_string(name),
                         role, to_ns(u_start), to_ns(std::chrono::steady_clock::now()), m.token().value,
                         result_fields(u)));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 20)(rng)));
  }
  h.record("stop", "");
  return 0;
}

pid_t parent_of(pid_t pid) {
  FILE* f = std::fopen(fmt::format("/proc/{}/stat", pid).c_str(), "r");
  if (f == nullptr) return 0;
  char buf[512] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string line(buf, n);
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  int ppid = 0;
  char state = 0;
  if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return 0;
  return ppid;
}

int run_touch(const arguments& a) {
  const auto names = split(a.get("names"));
  const char* name = std::getenv("REDSYNC_LOCK_NAME");
  const char* token = std::getenv("REDSYNC_FENCING_TOKEN");
  if (name == nullptr || token == nullptr)
    throw std::invalid_argument("touch runs under `redsync lock` (no REDSYNC_LOCK_NAME)");
  std::size_t slot = names.size();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) slot = i;
  if (slot == names.size()) throw std::invalid_argument(std::string("lock name not in --names: ") + name);
  redsync::chaos::shared_resource resource(a.get("resource"));
  history h(a.get("history"), a.get("client", "cli"));
  const pid_t supervisor = ::getppid();
  const char* run = std::getenv("CHAOS_RUN_ID");  // set by the harness for the tool, inherited
  h.record("command",
           fmt::format(R"("name":{},"token":{},"supervisor":{},"tool":{},"run":{})", json_string(name), token,
                       supervisor, parent_of(supervisor), json_string(run != nullptr ? run : "")));
  redsync::chaos::section_plan plan{
      .slot = slot,
      .name = name,
      .token = std::stoull(token),
      .work = std::chrono::milliseconds(a.number("work", 5)),
  };
  redsync::chaos::run_section(resource, h, plan);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "run") return run_client(parse(argc, argv));
    if (command == "semaphore") return run_semaphore_client(parse(argc, argv));
    if (command == "rw") return run_rw_client(parse(argc, argv));
    if (command == "touch") return run_touch(parse(argc, argv));
    fmt::print(stderr,
               "usage: chaos_client run|semaphore|rw|touch --option value ... (see the source's header)\n");
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "chaos_client: {}\n", e.what());
    return 2;
  }
}
