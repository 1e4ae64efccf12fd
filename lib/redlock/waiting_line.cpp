// A waiter's place in the fair line: joining, ranking, leaving, hearing
// releases.

#include "redlock/waiting_line.hpp"

#include <memory>

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

std::string now_in_microseconds() {
  return std::to_string(
      duration_cast<microseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace

// A head of line is given the claim window (mutex_state.hpp) to take a lock
// that became free or was reserved for it: enough for a live waiter (woken
// at once, or retrying after a missed wake-up), short next to a lease when
// it is gone.
waiting_line::waiting_line(mutex_state& st, std::string_view value, bool waits)
    : st_(st), value_(value), waits_(waits), arrival_(now_in_microseconds()), claim_ms_(st.claim_ms) {}

waiting_line::script_args waiting_line::args_for_attempt(milliseconds next_delay) const {
  // The lease covers the gap until our next attempt refreshes it.
  const auto lease = 2 * next_delay + duration_cast<milliseconds>(st_.timeout) + milliseconds{1000};
  return {arrival_, std::to_string(lease.count()), waits_ && reaches_quorum_ ? "1" : "0", claim_ms_};
}

void waiting_line::on_attempt_sent() {
  if (waits_ && reaches_quorum_) joined_ = true;
}

void waiting_line::on_attempt_answered(const tally& t) {
  first_ = false;
  std::size_t reached = 0;
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const auto status = t.nodes[i].status;
    if (status == node_status::taken && t.integers[i] == -2) first_ = true;
    if (status != node_status::timeout && status != node_status::unreachable &&
        status != node_status::not_awaited)
      ++reached;
  }
  // A waiter that cannot reach a quorum cannot use a place in the line, and
  // holding one on the few nodes it reaches would deny the lock to healthy
  // clients: it leaves the lines until an attempt reaches a quorum again
  // (then it rejoins with its first arrival, so keeps its rank).
  const bool reaches = reached >= st_.eng.quorum();
  if (waits_ && !reaches && joined_) leave(false, t);
  reaches_quorum_ = reaches;
}

void waiting_line::listen(release_listener::waiter* w) {
  if (!waits_ || listening_ || st_.eng.shutting_down()) return;
  for (const auto& channel : st_.channels) st_.eng.listener().watch(channel, w);
  listening_ = true;
}

void waiting_line::stop_listening(release_listener::waiter* w) {
  if (!listening_) return;
  for (const auto& channel : st_.channels) st_.eng.listener().unwatch(channel, w);
  listening_ = false;
}

void waiting_line::leave(bool acquired, const tally& last) {
  if (!joined_ || st_.eng.shutting_down()) return;
  joined_ = false;
  // Where our acquisition won, the acquire script already took us out; any
  // other node may still hold our place from this or an earlier attempt.
  auto needs_leave = [&](std::size_t i) {
    if (!acquired || i >= last.nodes.size()) return true;
    const auto status = last.nodes[i].status;
    return status != node_status::ok && status != node_status::excluded;
  };
  std::shared_ptr<script_call> call;  // encoded only if some node needs it (not on the common path)
  for (std::size_t i = 0; i < st_.eng.size(); ++i) {
    if (!needs_leave(i)) continue;
    if (!call) {
      std::vector<std::string_view> args{value_, st_.claim_ms};
      args.insert(args.end(), st_.channels.begin(), st_.channels.end());
      call = std::make_shared<script_call>(make_script_call(leave_script(), st_.release_keys, args));
    }
    send_script(st_.eng.script_mode(), st_.eng.node(i), st_.route, *call, st_.timeout,
                [call](command_result&&) {});
  }
}

}  // namespace redsync::detail
