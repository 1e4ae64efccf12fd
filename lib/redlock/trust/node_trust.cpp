// Node trust: the restart guard and the fencing-counter repair, node by node
// (the argument is in node_trust.hpp).

#include "redlock/trust/node_trust.hpp"

#include "redlock/quorum.hpp"
#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/script_answers.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/trust/trust_host.hpp"
#include "util/value_generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>

namespace redsync::detail {

namespace {

using std::chrono::milliseconds;

std::string short_id(std::string_view identity) {
  return std::string(identity.substr(0, 8));
}

using fsec = std::chrono::duration<double>;

}  // namespace

// One look at every node's record. Answers arrive in any order; the look is
// complete when every node answered or failed.
struct node_trust::look {
  std::string new_mark;  // the random part of a mark this look sets
  clock::time_point started{};
  std::size_t left = 0;
  std::vector<bool> answered;
  std::vector<std::string> mark;      // the node's mark as read (or set)
  std::vector<std::int64_t> mark_ms;  // when it was set (server ms), -1 if none
  std::vector<std::string> mark_identity;
  std::vector<std::string> identity;  // the node's identity when it answered
  std::vector<std::string> asked;     // the identity the read was sent for ('' before the handshake)
  std::vector<std::string> record_identity;
  std::vector<bool> has_counter;
  std::vector<std::int64_t> fence;
  std::vector<std::int64_t> now;  // server ms
  milliseconds recorded_window{0};
};

node_trust::node_trust(trust_host& eng, bool guard, std::chrono::milliseconds window, std::uint16_t slot)
    : eng_(eng), guard_(guard), fixed_window_(window), slot_(slot), nodes_(eng.size()) {}

std::string node_trust::record_of(std::size_t i) const {
  return eng_.is_cluster_member(i) ? cluster_record_key(slot_) : std::string(record_key);
}

std::chrono::milliseconds node_trust::window() const {
  if (!guard_) return milliseconds::zero();
  return std::max(fixed_window_, eng_.longest_expiry());
}

std::chrono::milliseconds node_trust::repair_delay(milliseconds recorded) const {
  // Whether or not the guard is on: the fencing proof needs every
  // acquisition that may have counted the node before its loss to be over.
  return std::max({fixed_window_, eng_.longest_expiry(), recorded, recorded_window_});
}

bool node_trust::window_covers(std::size_t i, milliseconds expiry) const {
  return !nodes_[i].no_transaction && nodes_[i].counted_window >= expiry;
}

void node_trust::transaction_refused(std::size_t i) {
  nodes_[i].no_transaction = true;
}

bool node_trust::exclude_yes(std::size_t i, const reply& r, std::string_view served_by, milliseconds expiry,
                             const std::vector<node_result>& round, std::string& why) {
  adopt_master(i, served_by);
  const bool excluded = judge_yes(i, r, expiry, round, why);
  eng_.telemetry().vote(i, excluded, why, served_by);  // observability: excluded / voting again
  return excluded;
}

bool node_trust::judge_yes(std::size_t i, const reply& r, milliseconds expiry,
                           const std::vector<node_result>& round, std::string& why) {
  node& n = nodes_[i];
  n.counted_window = milliseconds::zero();
  // is_cluster_member, not node(i): answers that arrive while the engine
  // shuts down are judged after its members are gone.
  if (eng_.is_cluster_member(i) && !answered_by_known_server(i, r, why)) return true;
  if (!n.problem.empty()) {
    why = n.problem;
    return true;
  }
  if (std::string dup = same_server(i, round); !dup.empty()) {
    why = std::move(dup);
    return true;
  }
  const std::optional<acquire_vote> vote = read_acquire_vote(r);
  if (!vote) {
    why = "unexpected reply to the acquisition";
    return true;
  }
  const std::string_view record_identity = vote->record_identity;
  const milliseconds recorded = vote->window;
  recorded_window_ = std::max(recorded_window_, recorded);
  if (n.identity.empty() || record_identity != n.identity) {
    if (!n.blocked.empty()) {
      why = n.blocked;
    } else if (!n.mark.empty() && n.ready_at > clock::now()) {
      why = fmt::format(
          "its redsync record is not verified for this server (run_id {}): it restarted, was replaced, lost "
          "its data or never served a lock; its fencing counter is repaired by the first client (this one "
          "or any other) to look at it {:.1f} s from now or later, once every acquisition that may have "
          "counted it before has ended",
          short_id(n.identity), fsec(n.ready_at - clock::now()).count());
    } else {
      why = fmt::format(
          "its redsync record is not verified for this server (run_id {}): it restarted, was replaced, lost "
          "its data or never served a lock; its fencing counter is being repaired",
          n.identity.empty() ? std::string("unknown") : short_id(n.identity));
    }
    start_look();
    return true;
  }
  const milliseconds age = vote->age;
  const auto w = guard_ ? std::max(window(), recorded) : milliseconds::zero();
  if (w > milliseconds::zero() && age < milliseconds::zero()) {
    // `since` is in the node's future: its clock was stepped back. The look
    // moves `since` to the node's present, so the window restarts from now
    // instead of lasting the size of the step.
    why = fmt::format(
        "restart guard: server run {} was first seen unverified {:.1f} s in the future of its clock (the "
        "node's clock moved back); its guard window ({} ms) starts again now",
        short_id(n.identity), fsec(-age).count(), w.count());
    start_look();
    return true;
  }
  if (w > milliseconds::zero() && age < w) {
    const auto shown_age = std::max(age, milliseconds::zero());
    why = fmt::format(
        "restart guard: server run {} was first seen unverified {:.1f} s ago, less than the guard window "
        "({} ms); keys it held before may be lost, so its vote counts again in {:.1f} s",
        short_id(n.identity), fsec(shown_age).count(), w.count(), fsec(w - shown_age).count());
    return true;
  }
  if (recorded < expiry) {
    why = fmt::format(
        "its redsync record's window ({} ms) is shorter than this lock's expiry ({} ms): other clients "
        "would repair the node too early after a restart; the next attempt raises it",
        recorded.count(), expiry.count());
    return true;
  }
  n.counted_window = recorded;
  n.voted_run_id = n.run_id;
  return false;
}

void node_trust::when_surveyed(std::chrono::microseconds timeout, std::function<void()> ready) {
  if (surveyed_) return ready();
  timeout_ = std::max(timeout_, timeout);
  waiting_.push_back(std::move(ready));
  start_look();
}

void node_trust::close() {
  closed_ = true;
  if (timer_) {
    timer_->close();
    timer_ = nullptr;
  }
}

void node_trust::schedule(clock::time_point at) {
  if (closed_ || at >= timer_at_) return;
  if (!timer_) timer_ = loop_timer::create(eng_.loop().loop());
  timer_at_ = at;
  timer_->start(std::chrono::duration_cast<std::chrono::microseconds>(at - clock::now()), [this] {
    timer_at_ = clock::time_point::max();
    start_look();
  });
}

void node_trust::start_look() {
  if (looking_ || stamps_in_flight_ > 0) {
    look_again_ = true;
    return;
  }
  if (closed_ || eng_.shutting_down()) return;
  looking_ = true;
  look_again_ = false;
  const std::size_t n = nodes_.size();
  auto l = std::make_shared<look>();
  l->new_mark = random_value();
  l->started = clock::now();
  l->left = n;
  l->answered.assign(n, false);
  l->mark.resize(n);
  l->mark_ms.assign(n, -1);
  l->mark_identity.resize(n);
  l->identity.resize(n);
  l->asked.resize(n);
  l->record_identity.resize(n);
  l->has_counter.assign(n, false);
  l->fence.assign(n, 0);
  l->now.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string key = record_of(i);
    // The read marks the node where needed, for the identity this
    // connection read (record_read_script): step (1) of the repair.
    l->asked[i] = nodes_[i].identity;
    auto call = std::make_shared<script_call>(make_script_call(
        record_read_script(), {key}, {std::string_view(l->new_mark), std::string_view(l->asked[i])}));
    send_script(eng_.script_mode(), eng_.at(i, slot_), 0, *call, timeout_,
                [this, alive = std::weak_ptr<int>(alive_), l, call, i](command_result&& r) {
                  if (alive.expired()) return;  // the engine is gone (closed from its own loop thread)
                  adopt_master(i, r.served_by);
                  std::optional<node_record> rec;
                  if (r.status == transport_status::ok) rec = read_node_record(r.value);
                  if (rec) {
                    l->answered[i] = true;
                    l->identity[i] = nodes_[i].identity;
                    l->has_counter[i] = rec->has_counter;
                    l->fence[i] = rec->fence;
                    l->record_identity[i] = rec->identity;
                    l->now[i] = rec->now_ms;
                    l->mark[i] = rec->mark;
                    l->mark_ms[i] = rec->mark_ms;
                    l->mark_identity[i] = rec->mark_identity;
                    l->recorded_window = std::max(l->recorded_window, rec->window);
                  }
                  if (--l->left == 0) {
                    looking_ = false;
                    on_look(*l);
                  }
                });
  }
}

void node_trust::on_look(const look& l) {
  if (closed_ || eng_.shutting_down()) return;
  const std::size_t n = nodes_.size();
  std::size_t verified = 0, answered = 0;
  std::int64_t highest = 0;
  bool any_counter = false;
  std::vector<bool> unverified(n, false);
  recorded_window_ = std::max(recorded_window_, l.recorded_window);
  for (std::size_t i = 0; i < n; ++i) {
    if (!l.answered[i]) continue;
    ++answered;
    highest = std::max(highest, l.fence[i]);
    any_counter = any_counter || l.has_counter[i];
    if (!l.identity[i].empty() && l.record_identity[i] == l.identity[i]) {
      // One server under two names is one verified node (node_trust.hpp).
      if (first_of_its_server(i)) ++verified;
      nodes_[i].mark.clear();
      nodes_[i].blocked.clear();
    } else {
      unverified[i] = true;
    }
  }
  // A brand-new cluster (every node answered, none has a counter) has never
  // granted a lock: nothing can be in flight, so no repair delay.
  const bool brand_new = answered == n && !any_counter;
  const auto delay = brand_new ? milliseconds::zero() : repair_delay(l.recorded_window);
  const bool may_repair = verified >= eng_.quorum() || answered == n;
  const std::string floor = std::to_string(highest);
  const std::string window_text = std::to_string(std::max(window().count(), recorded_window_.count()));
  const auto now = clock::now();
  // Step (2) needs every read of this look a repair delay after the mark:
  // the mark's age on the node's clock must cover the delay and this look's
  // own duration (node_trust.hpp).
  const auto took = std::chrono::ceil<milliseconds>(now - l.started);
  for (std::size_t i = 0; i < n; ++i) {
    if (!unverified[i] || l.identity[i].empty()) continue;
    node& nd = nodes_[i];
    if (l.asked[i] != l.identity[i]) {
      // Sent before the connection's handshake told who the node is (a
      // new connection), or before a reconnection: the read could not mark
      // it for its identity. Look again at once.
      look_again_ = true;
      continue;
    }
    if (l.mark_ms[i] < 0 || l.mark_identity[i] != l.identity[i]) {
      // No mark for this identity (a stale connection's identity, or a
      // concurrent look marked it for another): look again later.
      nd.mark.clear();
      nd.ready_at = saturating_add(now, std::max(delay, milliseconds(100)));
      schedule(nd.ready_at);
      continue;
    }
    nd.mark = l.mark[i];
    nd.first_seen = l.mark_ms[i];
    const bool set_now = l.mark[i].find(l.new_mark) != std::string::npos;
    const milliseconds age{l.now[i] - l.mark_ms[i]};  // >= 0: the read replaces a mark from the future
    const milliseconds wait = delay == milliseconds::zero() ? milliseconds::zero() : delay + took - age;
    if (set_now || wait > milliseconds::zero()) {
      // The slack of one more look's duration: the next look must find the
      // mark older than the delay plus its own duration.
      nd.ready_at = saturating_add(now, wait > milliseconds::zero() ? wait + took : milliseconds::zero());
      nd.blocked.clear();
      if (wait <= milliseconds::zero())
        look_again_ = true;
      else
        schedule(nd.ready_at);
      continue;
    }
    if (!may_repair) {
      // Keep the mark: a later look may have enough answers.
      nd.blocked = fmt::format(
          "its redsync record is not verified for this server (run_id {}) and cannot be repaired yet: that "
          "needs a quorum of verified nodes or every node to answer, and {} of {} answered with {} verified "
          "(a brand-new cluster needs every node up once)",
          short_id(l.identity[i]), answered, n, verified);
      continue;
    }
    nd.blocked.clear();
    ++stamps_in_flight_;
    // Never used anywhere: verified since time 0, no window (node_trust.hpp).
    const std::int64_t since = brand_new ? 0 : nd.first_seen;
    auto call = std::make_shared<script_call>(
        make_script_call(record_stamp_script(), {record_of(i)},
                         {floor, l.identity[i], nd.mark, std::to_string(since), window_text}));
    nd.mark.clear();
    send_script(eng_.script_mode(), eng_.at(i, slot_), 0, *call, timeout_,
                [this, alive = std::weak_ptr<int>(alive_), call](command_result&&) {
                  if (alive.expired()) return;
                  if (--stamps_in_flight_ == 0) settle();
                });
  }
  if (stamps_in_flight_ == 0) settle();
}

// A look (and its stamps) is over: look again if asked to, else let the
// acquisitions waiting for the first survey go (repairs that need a delay
// go on in the background).
void node_trust::settle() {
  if (look_again_ && !closed_ && !eng_.shutting_down()) return start_look();
  surveyed_ = true;
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& w : waiting) w();
}

}  // namespace redsync::detail
