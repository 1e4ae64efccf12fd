// Several processes, each with its own Redsync, contend for the k permits
// of one semaphore on 5 real nodes (sem_contender.cpp). What they report,
// on the steady clock every process shares, must show:
// - never more than k holders at once, and never two on one slot;
// - per slot, every later holder's token above every earlier one's (the
//   fencing rule of include/redsync/semaphore.hpp);
// - every acquisition succeeded, and each process made all its cycles (the
//   grant lines carry the pid: no process went without).
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "holders.hpp"
#include "names.hpp"
#include "redis_server.hpp"

namespace {

using redsync::contention::most_at_once;

std::string sem_contender_program() {
  const char* v = std::getenv("REDSYNC_SEM_CONTENDER");
  if (v == nullptr || *v == '\0')
    throw std::runtime_error("REDSYNC_SEM_CONTENDER is not set (meson test sets it)");
  return v;
}

struct held {
  std::uint32_t slot = 0;
  std::uint64_t token = 0;
  std::int64_t enter = 0;
  std::int64_t leave = 0;
  std::int64_t want = 0;
  pid_t pid = 0;
};

}  // namespace

TEST_CASE("processes contending for a semaphore: at most k holders, one per slot, tokens rising per slot") {
  constexpr int k = 2;
  constexpr int processes = 4;
  constexpr int cycles = 15;
  redsync::test::cluster c(5);
  std::string nodes;
  for (const auto& u : c.uris()) nodes += (nodes.empty() ? "" : ",") + u;
  const std::string name = redsync::test::unique_name("sem-processes");
  const std::string out = c[0].dir() + "/grants.txt";
  const std::string program = sem_contender_program();
  std::vector<pid_t> pids;
  for (int p = 0; p < processes; ++p) {
    const std::vector<std::string> args = {program,           "--nodes",  nodes,
                                           "--name",          name,       "--permits",
                                           std::to_string(k), "--cycles", std::to_string(cycles),
                                           "--out",           out};
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(program.c_str(), argv.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  for (const pid_t pid : pids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::vector<held> grants;
  std::ifstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    CHECK_MESSAGE(kind == "grant", line);
    held g;
    words >> g.slot >> g.token >> g.enter >> g.leave >> g.want >> g.pid;
    CHECK_MESSAGE(!words.fail(), line);
    grants.push_back(g);
  }
  REQUIRE(grants.size() == static_cast<std::size_t>(processes * cycles));
  // Per process: each ran its cycles to the end (it exited 0), so each
  // reported exactly that many grants; none went without. A count, not a
  // fairness bound: it holds however loaded the machine is.
  std::map<pid_t, int> per_process;
  for (const pid_t pid : pids) per_process[pid] = 0;
  for (const auto& g : grants) {
    const auto p = per_process.find(g.pid);
    CHECK_MESSAGE(p != per_process.end(), "grant from an unknown pid ", g.pid);
    if (p != per_process.end()) ++p->second;
  }
  for (const auto& [pid, count] : per_process) {
    const int process_pid = pid, process_grants = count;  // clang 14 cannot capture a structured binding
    CAPTURE(process_pid);
    CHECK(process_grants == cycles);
  }
  const std::size_t most = most_at_once(grants);
  MESSAGE("semaphore contention: at most ", most, " holders at once over ", grants.size(), " grants");
  CHECK(most <= static_cast<std::size_t>(k));
  std::map<std::uint32_t, std::vector<held>> by_slot;
  for (const auto& g : grants) {
    CHECK(g.slot < static_cast<std::uint32_t>(k));
    by_slot[g.slot].push_back(g);
  }
  for (auto& [slot, list] : by_slot) {
    const std::uint32_t slot_number = slot;  // clang 14 cannot capture a structured binding
    CAPTURE(slot_number);
    CHECK(most_at_once(list) == 1);
    std::sort(list.begin(), list.end(), [](const held& a, const held& b) { return a.enter < b.enter; });
    for (std::size_t i = 1; i < list.size(); ++i) CHECK(list[i].token > list[i - 1].token);
  }
}
