// A waiter's place in the fair line: the per-node calls, the wait between
// attempts and the lease that covers it, wake-ups, leaving.

#include "redlock/mutex/waiting_line.hpp"

#include "redlock/mutex/line_lease.hpp"
#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/mutex/slot_groups.hpp"
#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "util/sha1.hpp"

#include <algorithm>
#include <memory>

namespace redsync::detail {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

// A waiter behind the head cannot win until the head is served; it hears
// the release that makes it the head, and refreshes its place between
// wake-ups at least this often (a lost wake-up costs at most this)...
constexpr milliseconds behind_refresh_max{1000};
// ...and no more often than this, whatever retry delay it was given.
constexpr milliseconds behind_refresh_min{100};

}  // namespace

waiting_line::waiting_line(mutex_state& st, std::string_view value, bool waits)
    : st_(st),
      value_(value),
      waits_(waits),
      arrival_(fresh_arrival()),
      places_(st.eng.size(), place::out),
      open_(st.eng.size(), false) {}

std::string waiting_line::fresh_arrival() const {
  return line_arrival_now();
}

milliseconds waiting_line::prepare_attempt(milliseconds until_try, bool final_try) {
  until_try = std::max(until_try, milliseconds::zero());
  planned_wait_ = first_ ? std::min(until_try, st_.head_refresh)
                         : std::clamp(until_try, behind_refresh_min, behind_refresh_max);
  joins_ = waits_ && reaches_quorum_ && !final_try;
  awaits_every_node_ = waits_ && reach_open_ && !final_try;
  // The lease covers the gap until our next attempt refreshes it.
  const auto lease = line_lease(planned_wait_, st_.timeout);
  lease_ms_ = std::to_string(lease.count());
  next_arrival_ = fresh_arrival();
  // Encoded when a node is first sent the script (call_for): a first
  // attempt the transaction wins everywhere never needs it.
  join_call_ = {};
  stay_call_ = {};
  return planned_wait_;
}

const script_call& waiting_line::call_for(std::size_t i) {
  const bool stays = joins_ && places_[i] == place::in;
  script_call& call = stays ? stay_call_ : join_call_;
  if (!call) {
    std::vector<std::string_view> args{
        value_, st_.expiry_ms, arrival_, lease_ms_, stays ? "2" : joins_ ? "1" : "0", next_arrival_};
    call = st_.call(st_.scripts.acquire, &lock_keys::acquire_keys, args, true);
  }
  return call;
}

void waiting_line::on_script_sent(std::size_t i) {
  if (joins_ && places_[i] == place::out) places_[i] = place::maybe;
}

void waiting_line::on_attempt_sent() {
  std::fill(open_.begin(), open_.end(), false);
  if (joins_) ++*joins_sent_;
}

void waiting_line::on_won(std::size_t i, bool in_line) {
  // A yes from the head of the line leaves us in it (rule L), and an undo
  // would give the name back to us.
  places_[i] = in_line ? place::in : place::out;
  open_[i] = in_line;
}

void waiting_line::on_attempt_answered(const tally& t) {
  first_ = false;
  bool evicted = false;
  std::size_t reached = 0;
  std::size_t unknown = 0;
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    const auto status = t.nodes[i].status;
    if (status == node_status::taken) {
      // -1/-2: in line (-2: at the head of every line); -3/-4: the same,
      // put back at the end of a line that had lost us. nil: not waiting.
      // -5 (held as a semaphore): the script returned before joining or
      // leaving any line, so our place there is what it was (a line we
      // were in still lists us, and leave() must still go there).
      const long long v = t.integers[i];
      if (v != -5) places_[i] = v >= -4 && v <= -1 ? place::in : place::out;
      if (v == -2 || v == -4) first_ = true;
      if (v == -3 || v == -4) evicted = true;
    } else if ((status == node_status::ok || status == node_status::excluded) && open_[i]) {
      first_ = true;
    }
    if (status == node_status::not_awaited)
      ++unknown;
    else if (status != node_status::timeout && status != node_status::unreachable)
      ++reached;
  }
  // Rule A: once any node evicted us, our arrival is this attempt's on every
  // node, so the nodes keep agreeing on the order.
  if (evicted) arrival_ = next_arrival_;
  // A waiter that cannot reach a quorum cannot use a place in the line, and
  // holding one on the few nodes it reaches would deny the lock to healthy
  // clients: it leaves the lines until an attempt reaches a quorum again
  // (then it rejoins with its arrival, so keeps its rank).
  //
  // A node a fail_fast report did not await is unknown, not unreached: with
  // one node down, "taken" from one node and "unreachable" from the down one
  // decide the attempt before the third node answers. Counting that third
  // node as unreached made a waiter that reaches a quorum leave the line
  // after every such attempt (and join with "0" next), so every later
  // arrival overtook it. Where the unknown nodes could make up the quorum,
  // the waiter keeps its place as it is and has its next attempt await every
  // node (awaits_every_node), whose complete answers decide. So a waiter
  // leaves only when the nodes that answered "timeout" or "unreachable"
  // alone rule out a quorum, as for a waiter that awaits every node: one
  // that reaches a quorum is never skipped, and one cut off from the
  // majority still leaves, at most one attempt later. Safety does not
  // change: staying or leaving only changes who the line scripts serve
  // first, mutual exclusion never depends on the line (scripts.hpp), and an
  // attempt that awaits every node is the round a mutex without fail_fast
  // always makes (its validity still counts from the attempt's start).
  const std::size_t q = st_.eng.quorum();
  reach_open_ = reached < q && reached + unknown >= q;
  if (reach_open_) return;
  const bool reaches = reached >= q;
  if (waits_ && !reaches) leave();
  reaches_quorum_ = reaches;
}

milliseconds waiting_line::wait_after(milliseconds until_try) const {
  until_try = std::max(until_try, milliseconds::zero());
  if (first_) return std::min({until_try, st_.head_refresh, planned_wait_});
  return planned_wait_;
}

bool waiting_line::on_release(std::size_t i) {
  if (i < open_.size()) open_[i] = true;
  return quorum_open();
}

bool waiting_line::quorum_open() const {
  return static_cast<std::size_t>(std::count(open_.begin(), open_.end(), true)) >= st_.eng.quorum();
}

bool waiting_line::listen(release_listener::waiter* w) {
  if (!waits_ || listening_ || st_.eng.shutting_down()) return false;
  bool missed = false;
  // Our own channels (waiter_channel): a release wakes the waiter it names
  // and no other, however many wait.
  const std::string us = sha1_hex(value_);
  my_channels_.clear();
  for (std::size_t k = 0; k < st_.channels.size(); ++k) {
    // The name's channel on a cluster member (lock_keys' cluster layout).
    const std::string cluster_channel =
        st_.clustered.groups.empty() ? std::string()
                                     : waiter_channel(release_channel(cluster_lock_key(st_.names[k])), us);
    my_channels_.push_back(waiter_channel(st_.channels[k], us));
    missed = st_.eng.listener().watch(my_channels_.back(), w, cluster_channel) || missed;
  }
  listening_ = true;
  return missed;
}

void waiting_line::stop_listening(release_listener::waiter* w) {
  if (!listening_) return;
  for (const auto& channel : my_channels_) st_.eng.listener().unwatch(channel, w);
  listening_ = false;
}

fallback_wanted waiting_line::before_next_attempt() const {
  return [sent = joins_sent_, n = *joins_sent_, st = st_.weak_from_this(), gen = st_.generation] {
    const auto s = st.lock();
    return s && *sent == n && s->generation == gen;
  };
}

void waiting_line::leave() {
  if (st_.eng.shutting_down()) return;
  std::shared_ptr<script_call> call;  // encoded only if some node needs it (not on the common path)
  const fallback_wanted wanted = before_next_attempt();
  for (std::size_t i = 0; i < places_.size(); ++i) {
    if (places_[i] == place::out) continue;
    places_[i] = place::out;
    if (!call) {
      call = std::make_shared<script_call>(
          st_.call(st_.scripts.leave, &lock_keys::release_keys, {value_, "0"}, true));
    }
    send_to_member(
        st_.eng.at(i, st_.slot), *call, st_.slots,
        [this, &wanted](member_slot pool, const script_call& form, command_callback done) {
          send_script(st_.eng.script_mode(), pool, st_.route, form, st_.timeout, std::move(done), wanted);
        },
        member_answer(classify_three_way), [call](command_result&&) {});
  }
}

}  // namespace redsync::detail
