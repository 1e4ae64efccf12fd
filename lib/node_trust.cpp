#include "node_trust.hpp"

#include "engine.hpp"
#include "scripts.hpp"
#include "value_generator.hpp"

#include <fmt/format.h>

#include <charconv>
#include <memory>

namespace redsync::detail {

namespace {

using clock = std::chrono::steady_clock;

std::string_view info_field(std::string_view info, std::string_view key) {
  std::size_t at = 0;
  while ((at = info.find(key, at)) != std::string_view::npos) {
    if ((at == 0 || info[at - 1] == '\n') && at + key.size() < info.size() && info[at + key.size()] == ':') {
      const auto from = at + key.size() + 1;
      const auto to = info.find_first_of("\r\n", from);
      return info.substr(from, to == std::string_view::npos ? std::string_view::npos : to - from);
    }
    at += key.size();
  }
  return {};
}

std::int64_t to_int(std::string_view s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string short_id(std::string_view run_id) {
  return std::string(run_id.substr(0, 8));
}

}  // namespace

// One look at every node's record. Answers arrive in any order; the look is
// complete when every node answered or failed.
struct node_trust::look {
  std::string new_mark;  // for nodes that have none
  std::size_t left = 0;
  std::vector<bool> answered;
  std::vector<bool> marked;         // this look asked for a mark on the node
  std::vector<std::string> mark;    // the node's mark as read
  std::vector<std::string> run_id;  // the node's run_id when it answered
  std::vector<std::string> record_run;
  std::vector<std::int64_t> fence;
};

node_trust::node_trust(engine& eng, bool guard, std::chrono::milliseconds window)
    : eng_(eng), guard_(guard), fixed_window_(window), nodes_(eng.size()) {}

std::chrono::milliseconds node_trust::window() const {
  if (!guard_) return std::chrono::milliseconds::zero();
  return fixed_window_ > std::chrono::milliseconds::zero() ? fixed_window_ : eng_.longest_expiry();
}

void node_trust::on_server_info(std::size_t i, const reply& info) {
  node& n = nodes_[i];
  if (info.is_error()) {
    n.run_id.clear();
    n.problem = fmt::format(
        "cannot read INFO server ({}): redsync needs it (ACL: +info) to detect a restarted or replaced "
        "server, so this node's vote does not count",
        info.str);
    return;
  }
  const auto run_id = info_field(info.str, "run_id");
  if (run_id.empty()) {
    n.run_id.clear();
    n.problem =
        "INFO server has no run_id (a server other than Redis or Valkey?): redsync cannot detect a "
        "restart or replacement of this node, so its vote does not count";
    return;
  }
  n.problem.clear();
  n.run_id.assign(run_id);
}

bool node_trust::exclude_yes(std::size_t i, const reply& r, std::string& why) {
  const node& n = nodes_[i];
  if (!n.problem.empty()) {
    why = n.problem;
    return true;
  }
  const bool well_formed = r.type == reply::kind::array && r.elements.size() == 3 &&
                           r.elements[1].type == reply::kind::string &&
                           r.elements[2].type == reply::kind::integer;
  if (!well_formed) {
    why = "unexpected reply to the acquisition";
    return true;
  }
  const std::string& record_run = r.elements[1].str;
  if (n.run_id.empty() || record_run != n.run_id) {
    if (!n.blocked.empty()) {
      why = n.blocked;
      start_look();
      return true;
    }
    why = fmt::format(
        "its redsync record is not verified for this server (run_id {}): it restarted, was replaced, lost "
        "its data or never served a lock; its fencing counter is being repaired",
        n.run_id.empty() ? std::string("unknown") : short_id(n.run_id));
    start_look();
    return true;
  }
  const std::chrono::milliseconds age{r.elements[2].integer};
  const auto w = window();
  if (w > std::chrono::milliseconds::zero() && age < w) {
    using fsec = std::chrono::duration<double>;
    why = fmt::format(
        "restart guard: server run {} was first verified {:.1f} s ago, less than the guard window ({} ms); "
        "keys it held before may be lost, so its vote counts again in {:.1f} s",
        short_id(n.run_id), fsec(std::max(age, std::chrono::milliseconds::zero())).count(), w.count(),
        fsec(w - std::max(age, std::chrono::milliseconds::zero())).count());
    return true;
  }
  return false;
}

void node_trust::when_surveyed(std::chrono::microseconds timeout, std::function<void()> ready) {
  if (surveyed_) return ready();
  timeout_ = std::max(timeout_, timeout);
  waiting_.push_back(std::move(ready));
  start_look();
}

void node_trust::start_look() {
  if (looking_ || stamps_in_flight_ > 0) {
    look_again_ = true;
    return;
  }
  if (eng_.shutting_down()) return;
  looking_ = true;
  look_again_ = false;
  const std::size_t n = nodes_.size();
  auto l = std::make_shared<look>();
  l->new_mark = random_value();
  l->left = n;
  l->answered.assign(n, false);
  l->marked.assign(n, false);
  l->run_id.resize(n);
  l->record_run.resize(n);
  l->mark.resize(n);
  l->fence.assign(n, 0);
  const std::string key(record_key);
  // A node seen unverified in an earlier look is read without asking for a
  // mark: the repair goes by the mark it read then.
  auto marking = std::make_shared<script_call>(
      make_script_call(record_read_script(), {key}, {std::string_view(l->new_mark)}));
  auto plain = std::make_shared<script_call>(make_script_call(record_read_script(), {key}, {""}));
  for (std::size_t i = 0; i < n; ++i) {
    const bool mark = nodes_[i].mark.empty();
    auto call = mark ? marking : plain;
    send_script(
        eng_.node(i), 0, *call, timeout_,
        [this, alive = std::weak_ptr<int>(alive_), l, call, i, mark](command_result&& r) {
          if (alive.expired()) return;  // the engine is gone (closed from its own loop thread)
          const reply& v = r.value;
          if (r.status == transport_status::ok && v.type == reply::kind::array && v.elements.size() == 5) {
            l->answered[i] = true;
            l->marked[i] = mark;
            l->run_id[i] = nodes_[i].run_id;
            l->fence[i] = to_int(v.elements[0].str);
            l->record_run[i] = v.elements[1].str;
            l->mark[i] = v.elements[4].str;
          }
          if (--l->left == 0) {
            looking_ = false;
            on_look(*l);
          }
        });
  }
}

void node_trust::on_look(const look& l) {
  if (eng_.shutting_down()) return;
  const std::size_t n = nodes_.size();
  std::size_t verified = 0, answered = 0;
  std::int64_t highest = 0;
  std::vector<bool> unverified(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    if (!l.answered[i]) continue;
    ++answered;
    highest = std::max(highest, l.fence[i]);
    if (!l.run_id[i].empty() && l.record_run[i] == l.run_id[i]) {
      ++verified;
      nodes_[i].mark.clear();
      nodes_[i].blocked.clear();
    } else {
      unverified[i] = true;
    }
  }
  const bool may_repair = verified >= eng_.quorum() || answered == n;
  const std::string floor = std::to_string(highest);
  const std::string key(record_key);
  for (std::size_t i = 0; i < n; ++i) {
    if (!unverified[i] || l.run_id[i].empty()) continue;
    node& nd = nodes_[i];
    if (l.marked[i]) {
      // Seen unverified (and marked) now: the next look reads every node
      // after this, and may then repair it.
      nd.mark = l.mark[i];
      nd.mark_run = l.run_id[i];
      look_again_ = true;
      continue;
    }
    if (nd.mark_run != l.run_id[i] || nd.mark != l.mark[i]) {  // restarted or flushed since
      nd.mark.clear();
      look_again_ = true;
      continue;
    }
    if (!may_repair) {
      // Keep the mark: a later look may have enough answers.
      nd.blocked = fmt::format(
          "its redsync record is not verified for this server (run_id {}) and cannot be repaired yet: that "
          "needs a quorum of verified nodes or every node to answer, and {} of {} answered with {} verified "
          "(a brand-new cluster needs every node up once)",
          short_id(l.run_id[i]), answered, n, verified);
      continue;
    }
    nd.blocked.clear();
    ++stamps_in_flight_;
    auto call = std::make_shared<script_call>(
        make_script_call(record_stamp_script(), {key}, {floor, l.run_id[i], nd.mark}));
    nd.mark.clear();
    send_script(eng_.node(i), 0, *call, timeout_,
                [this, alive = std::weak_ptr<int>(alive_), call](command_result&&) {
                  if (alive.expired()) return;
                  if (--stamps_in_flight_ == 0) settle();
                });
  }
  if (stamps_in_flight_ == 0) settle();
}

// A look (and its stamps) is over: look again if asked to, else let the
// acquisitions waiting for the first survey go.
void node_trust::settle() {
  if (look_again_ && !eng_.shutting_down()) return start_look();
  surveyed_ = true;
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& w : waiting) w();
}

}  // namespace redsync::detail
