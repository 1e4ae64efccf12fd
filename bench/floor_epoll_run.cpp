// floor_epoll (issue 34): runs bench/floor_epoll.c, the raw-socket + epoll
// probe built next to this program, once per mode (all five replies, and a
// quorum of them), with the cycle section's sample counts, and reports its
// figures. It shares no code with the library, so every cycle median of the
// same run can be read as a ratio to what the kernel and the servers allow.

#include "bench.hpp"

#include <fmt/format.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

namespace {

// Runs `args` (argv[0] a path) and returns its stdout; throws when it cannot
// start or does not exit 0 (its stderr, inherited, says why).
std::string run_program(const std::vector<std::string>& args) {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("floor_epoll: pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("floor_epoll: fork failed");
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(
        fmt::format("{} failed (exit status {}{})", args[0], WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                    WIFEXITED(status) && WEXITSTATUS(status) == 127 ? ", not found?" : ""));
  }
  return text;
}

// The number after "key": in the probe's one flat JSON object.
double field(const std::string& text, std::string_view key) {
  const std::string quoted = fmt::format("\"{}\":", key);
  const auto at = text.find(quoted);
  if (at == std::string::npos) {
    throw std::runtime_error(fmt::format("floor_epoll: no '{}' in its output '{}'", key, text));
  }
  return std::strtod(text.c_str() + at + quoted.size(), nullptr);
}

}  // namespace

json run_floor_epoll(const config& cfg) {
  const std::string program = program_next_to_self("floor_epoll");
  std::string nodes;
  for (const auto& n : cfg.nodes) nodes += (nodes.empty() ? "" : ",") + n;
  json j;
  j.text("probe",
         "bench/floor_epoll.c: one thread, raw non-blocking TCP_NODELAY sockets, one epoll, RESP by hand; "
         "a cycle = SET NX PX to every node, then EVALSHA compare-and-delete to every node");
  for (const char* mode : {"all", "quorum"}) {
    const std::string out = run_program({program, "--nodes", nodes, "--warmup", std::to_string(cfg.warmup),
                                         "--samples", std::to_string(cfg.iterations), "--mode", mode});
    json m;
    m.integer("waits_for", static_cast<std::int64_t>(field(out, "waits_for")))
        .integer("n", static_cast<std::int64_t>(field(out, "samples")))
        .num("median_us", field(out, "median_us"))
        .num("p99_us", field(out, "p99_us"))
        .num("mean_us", field(out, "mean_us"))
        .num("min_us", field(out, "min_us"))
        .num("max_us", field(out, "max_us"))
        .num("client_cpu_us_per_cycle", field(out, "client_cpu_us_per_cycle"))
        .integer("set_refused", static_cast<std::int64_t>(field(out, "set_refused")));
    j.object(mode, m);
  }
  return j;
}

}  // namespace bench
