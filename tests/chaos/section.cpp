// One critical section against the shared resource (see the header).
#include "section.hpp"

#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

namespace redsync::chaos {

namespace {

std::atomic<std::uint32_t> next_section{1};

// Alive and not a zombie: a holder killed by its supervisor leaves its marker
// behind, which is not an overlap.
bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' &&
         line[close + 2] != 'X';
}

// Signals that would end the process between a write and its record are
// held back for that moment, so the history matches the resource.
class signals_held {
 public:
  signals_held() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &old_);
  }
  ~signals_held() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  signals_held(const signals_held&) = delete;
  signals_held& operator=(const signals_held&) = delete;

 private:
  sigset_t old_{};
};

}  // namespace

void run_section(shared_resource& resource, history& h, const section_plan& plan) {
  if (plan.token > 0xffff'ffffU) {  // the checker counts this as a violation
    h.record("token_overflow", fmt::format(R"("name":{},"token":{})", json_string(plan.name), plan.token));
    return;
  }
  const std::uint64_t marker = (static_cast<std::uint64_t>(h.proc_id()) << 32) | next_section++;
  {
    signals_held held;
    const auto previous = resource.enter(plan.slot, marker, static_cast<std::uint64_t>(::getpid()));
    const bool previous_alive = previous.marker != 0 && process_alive(static_cast<pid_t>(previous.pid));
    h.record("enter", fmt::format(R"("name":{},"token":{},"marker":{},"prev":{},"prev_alive":{},"until":{})",
                                  json_string(plan.name), plan.token, marker, previous.marker, previous_alive,
                                  plan.until_ns));
  }
  bool write_it = true;
  std::uint64_t read_value = 0;
  {
    signals_held held;
    const auto t = resource.touch(plan.slot, plan.token);
    h.record("touch",
             fmt::format(R"("name":{},"token":{},"accepted":{},"stale":{},"highest":{},"counter":{})",
                         json_string(plan.name), plan.token, t.accepted, t.stale, t.highest, t.counter));
    write_it = t.accepted;
    read_value = t.counter;
  }
  if (write_it) std::this_thread::sleep_for(plan.work);
  if (write_it && plan.still_held && !plan.still_held()) {
    h.record("abandon", fmt::format(R"("name":{},"token":{})", json_string(plan.name), plan.token));
    write_it = false;
  }
  signals_held held;
  if (write_it) {
    // Recorded first, so a process killed between the write and its record
    // (SIGKILL cannot be held back) is known to the checker.
    h.record("write_intent", fmt::format(R"("name":{},"token":{})", json_string(plan.name), plan.token));
    const auto w = resource.write(plan.slot, plan.token, read_value);
    h.record(
        "write",
        fmt::format(
            R"("name":{},"token":{},"accepted":{},"stale":{},"overwrote":{},"highest":{},"counter_before":{},"value":{})",
            json_string(plan.name), plan.token, w.accepted, w.stale, w.overwrote, w.highest, w.counter_before,
            read_value + 1));
  }
  const bool cleared = resource.leave(plan.slot, marker);
  const std::int64_t until = plan.until_at_leave ? plan.until_at_leave() : plan.until_ns;
  h.record("leave", fmt::format(R"("name":{},"token":{},"marker":{},"cleared":{},"until":{})",
                                json_string(plan.name), plan.token, marker, cleared, until));
}

}  // namespace redsync::chaos
