// Soak: the fault schedule, one node at a time.
#pragma once

#include "redis_server.hpp"

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace redsync::soak {

/// Durations of the faults. All fields are optional.
struct fault_timing {
  /// How long a short SIGSTOP lasts: less than the per-node timeout, so a
  /// command sent just before it is answered late but in time. Default 25 ms.
  std::chrono::milliseconds short_pause{25};
  /// How long a long SIGSTOP lasts: several per-node timeouts. Default 300 ms.
  std::chrono::milliseconds long_pause{300};
  /// How long a killed node stays down before its restart. Default 100 ms.
  std::chrono::milliseconds down{100};
  /// Quiet time after each fault ends. Default 250 ms.
  std::chrono::milliseconds gap{250};
};

/// Injects faults into a cluster on a schedule: in turn CLIENT KILL TYPE
/// normal, a short SIGSTOP, SCRIPT FLUSH, a long SIGSTOP, kill -9 and a
/// restart with an empty dataset, and CLIENT KILL TYPE pubsub, each on the
/// next node in turn (6 kinds over 5 nodes: every kind meets every node).
///
/// Never a majority at once: one fault runs at a time, and only a restarted
/// node stays impaired after its fault ended (excluded by the restart guard
/// for about one expiry); with five faults between two restarts, at most two
/// nodes of five are impaired at any moment.
///
/// Main thread only: the harness ties a server's life to the thread that
/// started it (PR_SET_PDEATHSIG), and restarts start servers.
class fault_driver {
 public:
  using clock = std::chrono::steady_clock;

  fault_driver(test::cluster& nodes, fault_timing timing);

  /// Starts the next fault, or runs the next step of the current one (the
  /// SIGCONT of a pause, the restart of a kill). Returns when the next step
  /// is due. A fault command that fails is recorded in errors(), not thrown.
  clock::time_point step();
  /// Ends the current fault now: resumes a paused node, restarts a killed one.
  void heal();

  /// Faults started, by kind.
  const std::map<std::string, int>& started() const noexcept { return started_; }
  /// What went wrong injecting them (a fault command the node refused, ...).
  const std::vector<std::string>& errors() const noexcept { return errors_; }

 private:
  struct action {
    std::function<void()> run;
    std::chrono::milliseconds then_wait;
  };
  void plan_next();
  void command(std::size_t node, const std::vector<std::string>& argv);
  void run(action& a);

  test::cluster& nodes_;
  fault_timing timing_;
  std::size_t next_ = 0;  // faults planned so far
  std::deque<action> pending_;
  std::map<std::string, int> started_;
  std::vector<std::string> errors_;
};

}  // namespace redsync::soak
