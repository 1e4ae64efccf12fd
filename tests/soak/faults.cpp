#include "faults.hpp"

#include "redis_client.hpp"

#include <exception>

namespace redsync::soak {

namespace {

enum class kind {
  client_kill_normal,
  short_pause,
  script_flush,
  long_pause,
  kill_restart,
  client_kill_pubsub
};
constexpr int kinds = 6;

const char* name_of(kind k) {
  switch (k) {
    case kind::client_kill_normal: return "client_kill_normal";
    case kind::short_pause: return "short_pause";
    case kind::script_flush: return "script_flush";
    case kind::long_pause: return "long_pause";
    case kind::kill_restart: return "kill_restart";
    case kind::client_kill_pubsub: return "client_kill_pubsub";
  }
  return "?";
}

}  // namespace

fault_driver::fault_driver(test::cluster& nodes, fault_timing timing) : nodes_(nodes), timing_(timing) {
  for (int k = 0; k < kinds; ++k) started_[name_of(static_cast<kind>(k))] = 0;
}

void fault_driver::command(std::size_t node, const std::vector<std::string>& argv) {
  // A fresh connection per command: CLIENT KILL must not find one of ours
  // half-used, and none stays open to be counted among the soak's fds.
  test::redis_client client(nodes_[node]);
  auto r = client.command(argv);
  if (r.type == test::redis_client::reply::kind::error) {
    errors_.push_back(nodes_[node].address() + ": " + argv[0] + " " + argv[1] + ": " + r.str);
  }
}

void fault_driver::plan_next() {
  const auto k = static_cast<kind>(next_ % kinds);
  const std::size_t n = next_ % nodes_.size();
  ++next_;
  ++started_[name_of(k)];
  auto& server = nodes_[n];
  switch (k) {
    case kind::client_kill_normal:
      pending_.push_back({[this, n] { command(n, {"CLIENT", "KILL", "TYPE", "normal"}); }, timing_.gap});
      break;
    case kind::client_kill_pubsub:
      pending_.push_back({[this, n] { command(n, {"CLIENT", "KILL", "TYPE", "pubsub"}); }, timing_.gap});
      break;
    case kind::script_flush:
      pending_.push_back({[this, n] { command(n, {"SCRIPT", "FLUSH"}); }, timing_.gap});
      break;
    case kind::short_pause:
    case kind::long_pause:
      pending_.push_back(
          {[&server] { server.pause(); }, k == kind::short_pause ? timing_.short_pause : timing_.long_pause});
      pending_.push_back({[&server] { server.resume(); }, timing_.gap});
      break;
    case kind::kill_restart:
      pending_.push_back({[&server] { server.kill(); }, timing_.down});
      pending_.push_back({[&server] { server.restart(); }, timing_.gap});
      break;
  }
}

void fault_driver::run(action& a) {
  try {
    a.run();
  } catch (const std::exception& e) {
    errors_.push_back(e.what());
  }
}

fault_driver::clock::time_point fault_driver::step() {
  if (pending_.empty()) plan_next();
  action a = std::move(pending_.front());
  pending_.pop_front();
  run(a);
  return clock::now() + a.then_wait;
}

void fault_driver::heal() {
  while (!pending_.empty()) {
    action a = std::move(pending_.front());
    pending_.pop_front();
    run(a);
  }
}

}  // namespace redsync::soak
