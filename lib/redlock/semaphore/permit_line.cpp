// A blocking acquire's place in the permits' fair line.

#include "redlock/semaphore/permit_line.hpp"

#include "redlock/mutex/line_lease.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "redlock/semaphore/semaphore_state.hpp"
#include "util/sha1.hpp"
#include "util/value_generator.hpp"

#include <algorithm>

namespace redsync::detail {

using std::chrono::milliseconds;

permit_line::permit_line(semaphore_state& st, bool waits)
    : st_(st),
      waiter_(waits ? random_value() : std::string()),
      arrival_(line_arrival_now()),
      in_line_(st.eng.size(), false),
      open_(st.eng.size(), false) {}

void permit_line::prepare_attempt(milliseconds until_try, bool final_try) {
  until_try = std::max(until_try, milliseconds::zero());
  lease_ms_ = std::to_string(line_lease(until_try, st_.timeout).count());
  joins_ = !waiter_.empty() && reaches_quorum_ && !final_try;
  undo_ = {};
  std::fill(open_.begin(), open_.end(), false);
}

std::vector<std::string_view> permit_line::acquire_args() const {
  return {waiter_, arrival_, lease_ms_, joins_ ? "1" : "0"};
}

void permit_line::on_attempt_sent() {
  if (joins_) std::fill(in_line_.begin(), in_line_.end(), true);
}

void permit_line::on_open(std::size_t i) {
  if (i < open_.size()) open_[i] = true;
}

bool permit_line::quorum_open() const {
  return static_cast<std::size_t>(std::count(open_.begin(), open_.end(), true)) >= st_.quorum;
}

void permit_line::on_attempt_answered(const tally& t) {
  if (waiter_.empty()) return;
  // A waiter that cannot reach a quorum cannot use a place in the line, and
  // holding one on the few nodes it reaches would keep free permits from
  // healthy clients there. (The semaphore's rounds await every node, so
  // the answers are complete.)
  std::size_t unreached = 0;
  for (const node_result& n : t.nodes)
    if (n.status == node_status::timeout || n.status == node_status::unreachable) ++unreached;
  reaches_quorum_ = t.nodes.size() - unreached >= st_.quorum;
  if (reaches_quorum_) return;
  leave(nullptr);
  // The attempt's undo, sent after the leave, must not put us back.
  joins_ = false;
}

const script_call& permit_line::undo_for(const permit_state& p) {
  if (!joins_) return p.release_call;
  if (!undo_)
    undo_ = st_.call(semaphore_release_script(), semaphore_state::keys_of::release,
                     {p.member, st_.channel, st_.permits_text, waiter_, arrival_, lease_ms_}, 1);
  return undo_;
}

bool permit_line::listen(release_listener::waiter* w) {
  const std::string sha = sha1_hex(waiter_);
  channel_ = waiter_channel(st_.channel, sha);
  const std::string cluster_channel =
      st_.clustered ? waiter_channel(st_.cluster_channel, sha) : std::string();
  return st_.eng.listener().watch(channel_, w, cluster_channel);
}

void permit_line::stop_listening(release_listener::waiter* w) {
  st_.eng.listener().unwatch(channel_, w);
}

void permit_line::leave(const std::vector<bool>* won) {
  script_call call;
  for (std::size_t i = 0; i < in_line_.size(); ++i) {
    if (!in_line_[i] || (won && (*won)[i])) continue;
    in_line_[i] = false;
    if (!st_.eng.can_send()) return;
    if (!call)
      call = st_.call(semaphore_leave_script(), semaphore_state::keys_of::release,
                      {waiter_, st_.channel, st_.permits_text}, 1);
    send_script_in_order(st_.eng.script_mode(), st_.eng.at(i, st_.slot), st_.route, call, st_.timeout,
                         st_.eng.track_cleanup([](command_result&&) {}));
  }
}

}  // namespace redsync::detail
