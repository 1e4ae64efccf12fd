// The waiting line's protocol explorer (lib/redlock/scripts/scripts.hpp, "The
// waiting line's protocol"): the real acquire, release, undo and leave
// scripts, sent with EVAL exactly as the library builds their KEYS and ARGV
// (mutex_state.cpp, waiting_line.cpp), on three real nodes, in chosen and in
// seeded random interleavings of per-node steps.
//
// Each script is atomic on its node, so apart from time the state space is
// the order of the per-node steps of all clients. Each client is a small
// state machine mirroring waiting_line and acquisition: per node a place
// (out, maybe, in), join ("1") or stay ("2") calls, an arrival and a fresh
// arrival per attempt; an attempt is one acquire step per node in any
// order; a quorum of yes makes a holder (which then leaves the lines it may
// be in), otherwise the yes nodes get an undo. A holder releases node by
// node; a waiter may give up (leave) or abandon an attempt in flight
// (release everywhere, then leave). Steps of one client on one node run in
// the order it sent them (one connection per node); everything else is the
// scheduler's choice.
//
// After every step the explorer checks:
//  - mutual exclusion: per name, at most one client believes it holds, and
//    a believer's value is on a quorum of nodes;
//  - a holder's value changes only by its own release or undo;
//  - rule R on the node just stepped: a name no holder holds is reserved
//    iff its line has a live waiter, and the reservation names the live
//    head; and rule A: a waiter's score is its arrival on every node;
//  - progress: an attempt of the earliest waiter that starts while no node
//    holds a lock value on its names and it is in every line wins; and the
//    earliest waiter needs at most two attempts that start with the lock
//    free; in runs where nobody gives up every client gets the lock, and
//    when all is done every node is empty.
// Leases and expiries are long (time plays no part) except in the scenario
// about an expired lease, which waits on the server clock.
//
// REDSYNC_EXPLORER_SCALE (default 1) multiplies the random steps;
// REDSYNC_EXPLORER_SEED adds a run with that seed. Every random run prints
// its seed; a violation prints the schedule that led to it.

#include "redlock/scripts/scripts.hpp"

#include "names.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "wait.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace redsync::test;
namespace rd = redsync::detail;

namespace {

constexpr std::size_t node_count = 3;
constexpr std::size_t quorum = 2;
// Long enough that nothing expires during an untimed run.
constexpr long long long_ms = 600'000;

using reply = redis_client::reply;

bool is_reservation(const std::string& v) {
  return v.rfind(rd::reserved_value(""), 0) == 0;
}

std::string show(const std::string& v) {
  return is_reservation(v) ? "R(" + v.substr(rd::reserved_value("").size()) + ")" : v;
}

// One lock's keys, as mutex_state builds them: acquire = names, record,
// lines, leases; release (and undo, leave) = names, lines, leases.
struct lock_keys {
  std::vector<std::string> names;
  std::vector<std::string> acquire_keys;
  std::vector<std::string> release_keys;
  std::vector<std::string> channels;

  explicit lock_keys(std::vector<std::string> n) : names(std::move(n)) {
    std::sort(names.begin(), names.end());
    std::vector<std::string> lines, leases;
    for (const auto& name : names) {
      lines.push_back(rd::line_key(name));
      leases.push_back(rd::lease_key(name));
      channels.push_back(rd::release_channel(name));
    }
    acquire_keys = names;
    acquire_keys.emplace_back(rd::record_key);
    acquire_keys.insert(acquire_keys.end(), lines.begin(), lines.end());
    acquire_keys.insert(acquire_keys.end(), leases.begin(), leases.end());
    release_keys = names;
    release_keys.insert(release_keys.end(), lines.begin(), lines.end());
    release_keys.insert(release_keys.end(), leases.begin(), leases.end());
  }
};

// What a node keeps for one name.
struct name_state {
  std::optional<std::string> key;
  std::vector<std::pair<std::string, long long>> line;  // oldest first
  std::map<std::string, long long> leases;              // server ms
};

struct node_state {
  long long now = 0;  // server ms
  std::map<std::string, name_state> names;

  // The live head of `name`'s line, as live_head() computes it.
  std::optional<std::string> live_head(const std::string& name) const {
    const auto& s = names.at(name);
    for (const auto& [who, score] : s.line) {
      const auto l = s.leases.find(who);
      if (l != s.leases.end() && l->second >= now) return who;
    }
    return std::nullopt;
  }
  bool live(const std::string& name, const std::string& who) const {
    const auto& s = names.at(name);
    const auto l = s.leases.find(who);
    if (l == s.leases.end() || l->second < now) return false;
    return std::any_of(s.line.begin(), s.line.end(), [&](const auto& e) { return e.first == who; });
  }
  std::optional<long long> score(const std::string& name, const std::string& who) const {
    for (const auto& [w, s] : names.at(name).line)
      if (w == who) return s;
    return std::nullopt;
  }
};

// Reads a node's state for every name in one atomic step.
constexpr const char* snapshot_source = R"lua(
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
local n = #KEYS / 3
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v then out[#out + 1] = {1, v} else out[#out + 1] = {0, ''} end
  out[#out + 1] = redis.call('ZRANGE', KEYS[n + i], 0, -1, 'WITHSCORES')
  out[#out + 1] = redis.call('HGETALL', KEYS[2 * n + i])
end
return out
)lua";

enum class place { out, maybe, in };
enum class phase { idle, attempting, undoing, waiting, holding, releasing };
enum class msg_kind { acquire, plain_set, undo, release, leave };

const char* kind_name(msg_kind k) {
  switch (k) {
    case msg_kind::acquire: return "acquire";
    case msg_kind::plain_set: return "SET-NX";
    case msg_kind::undo: return "undo";
    case msg_kind::release: return "release";
    case msg_kind::leave: return "leave";
  }
  return "?";
}

// A command one client sent one node, not yet run there.
struct message {
  msg_kind kind;
  std::vector<std::string> argv;
  std::string value;
  std::string mode;         // acquire: "0", "1" or "2"
  std::uint64_t round = 0;  // the client's round it answers to (0: nobody waits)
};

struct answer {
  bool yes = false;
  bool in_line = false;
  std::optional<long long> code;  // a refusal: -1..-4, or nullopt for nil
};

struct client {
  std::string label;
  const lock_keys* lock = nullptr;
  bool blocking = true;
  long long lease_ms = long_ms;
  int acquisitions_left = 1;
  int acquisitions_done = 0;
  // The current acquisition.
  int generation = 0;
  std::string value;
  long long arrival = 0;
  long long next_arrival = 0;
  std::array<place, node_count> places{};
  phase ph = phase::idle;
  bool fast_first = false;  // this acquisition's first attempt uses SET NX
  int attempts = 0;
  int free_attempts = 0;  // attempts begun as the earliest waiter with the lock free
  bool must_win = false;  // this attempt must win (see begin_attempt)
  std::uint64_t round = 0;
  std::array<std::optional<answer>, node_count> answers{};
  std::array<bool, node_count> undo_pending{};
  std::array<std::deque<message>, node_count> queue;
  bool believes = false;
};

long long env_number(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

struct explorer_options {
  bool give_ups = false;       // waiters give up and abandon attempts
  double fast_path = 0.5;      // chance a single-name acquisition starts with SET NX
  bool check_progress = true;  // the progress claims (no give-ups, every client keeps trying)
};

class explorer {
 public:
  explorer(cluster& c, std::uint64_t seed, explorer_options o = {})
      : opts_(o),
        rng_(seed),
        base_(std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count()) {
    for (std::size_t i = 0; i < node_count; ++i) nodes_.push_back(std::make_unique<redis_client>(c[i]));
    names_ = {unique_name("line-x-a"), unique_name("line-x-b")};
    std::sort(names_.begin(), names_.end());
    for (const auto& n : names_) {
      snapshot_keys_.push_back(n);
    }
    for (const auto& n : names_) snapshot_keys_.push_back(rd::line_key(n));
    for (const auto& n : names_) snapshot_keys_.push_back(rd::lease_key(n));
    for (std::size_t i = 0; i < node_count; ++i) state_[i] = read_node(i);
  }

  const std::string& name(std::size_t i) const { return names_.at(i); }
  redis_client& node(std::size_t i) { return *nodes_.at(i); }
  const node_state& state(std::size_t i) const { return state_.at(i); }
  client& at(int c) { return clients_.at(static_cast<std::size_t>(c)); }
  std::size_t client_count() const { return clients_.size(); }
  bool failed() const { return failed_; }
  // Rule A's check (a waiter's score is its arrival) is off in scenarios
  // that move a waiter back on purpose.
  void check_arrivals(bool on) { check_arrivals_ = on; }
  // Rule R's check is off in the timed scenario, which checks by hand.
  void check_rule_r(bool on) { check_rule_r_ = on; }
  // Reads node i again after a test changed it behind the clients' backs.
  void refresh(std::size_t i) { state_[i] = read_node(i); }
  int max_free_attempts() const { return max_free_attempts_; }
  std::size_t steps() const { return steps_; }

  // A client locking the given names (indexes into name()).
  int add_client(const std::string& label, std::vector<std::size_t> which, bool blocking = true,
                 int acquisitions = 1) {
    std::vector<std::string> n;
    for (auto w : which) n.push_back(names_.at(w));
    locks_.push_back(std::make_unique<lock_keys>(n));
    client c;
    c.label = label;
    c.lock = locks_.back().get();
    c.blocking = blocking;
    c.acquisitions_left = acquisitions;
    clients_.push_back(std::move(c));
    return static_cast<int>(clients_.size() - 1);
  }

  // ---- Client actions (what the library does on its own) ----

  // lock() (blocking) or try_lock(): a fresh value and arrival.
  void start(int ci, bool fast = false) {
    client& c = at(ci);
    REQUIRE(c.ph == phase::idle);
    ++c.generation;
    c.value = c.label + "#" + std::to_string(c.generation);
    c.arrival = clock_us();
    c.places.fill(place::out);
    c.attempts = 0;
    c.free_attempts = 0;
    c.fast_first = fast && c.lock->names.size() == 1;
    log("start " + c.value + " arrival " + std::to_string(c.arrival - base_) + (c.fast_first ? " fast" : ""));
    begin_attempt(ci);
  }

  // The next attempt of a waiter (after its failed attempt was undone).
  void retry(int ci) {
    REQUIRE(at(ci).ph == phase::waiting);
    begin_attempt(ci);
  }

  // unlock(): the release on every node.
  void release(int ci) {
    client& c = at(ci);
    REQUIRE(c.ph == phase::holding);
    c.believes = false;
    c.ph = phase::releasing;
    ++c.round;
    log(c.value + " releases");
    for (std::size_t i = 0; i < node_count; ++i) send(c, i, holder_call(c, msg_kind::release, "0"), true);
    c.undo_pending.fill(true);
  }

  // A waiter between attempts gives up: it leaves where it may be in line.
  void give_up(int ci) {
    client& c = at(ci);
    REQUIRE(c.ph == phase::waiting);
    log(c.value + " gives up");
    leave(c);
    finish(c);
  }

  // A deadline or cancellation with a round in flight: the release on every
  // node (after what is in flight there), then leave.
  void abandon(int ci) {
    client& c = at(ci);
    REQUIRE((c.ph == phase::attempting || c.ph == phase::undoing));
    log(c.value + " abandons its attempt");
    ++c.round;  // answers in flight are not awaited any more
    for (std::size_t i = 0; i < node_count; ++i) send(c, i, holder_call(c, msg_kind::release, "0"), false);
    leave(c);
    finish(c);
  }

  // ---- Steps (the scheduler's choice) ----

  bool pending(int ci, std::size_t i) { return !at(ci).queue[i].empty(); }

  // Runs client ci's oldest command on node i; returns its raw reply.
  reply deliver(int ci, std::size_t i) {
    client& c = at(ci);
    REQUIRE(!c.queue[i].empty());
    message m = std::move(c.queue[i].front());
    c.queue[i].pop_front();
    const node_state before = state_[i];
    reply r = node(i).command(m.argv);
    ++steps_;
    state_[i] = read_node(i);
    std::string what = c.label + " " + kind_name(m.kind) + (m.mode.empty() ? "" : "(" + m.mode + ")") + " " +
                       m.value + " @n" + std::to_string(i) + " -> " + describe(r);
    log(what + "   | n" + std::to_string(i) + ": " + describe_node(i));
    if (r.type == reply::kind::error) violation("error reply: " + r.str);
    check_holder_values(i, before, m);
    check_rule_r(i);
    check_arrivals();
    if (m.round == c.round && m.round != 0) on_reply(ci, i, m, r);
    check_exclusion();
    return r;
  }

  // ---- Random exploration ----

  // Runs up to `steps` random steps, fewer if every client is done first.
  // Clients in `holding` release after a random while.
  void run_random(std::size_t steps) {
    std::uniform_real_distribution<double> u(0, 1);
    for (std::size_t s = 0; s < steps && !failed_; ++s) {
      struct choice {
        int c;
        int node;  // -1: a client action
      };
      std::vector<choice> choices;
      for (int ci = 0; ci < static_cast<int>(clients_.size()); ++ci) {
        client& c = at(ci);
        for (std::size_t i = 0; i < node_count; ++i)
          if (!c.queue[i].empty()) choices.push_back({ci, static_cast<int>(i)});
        const bool acts = (c.ph == phase::idle && c.acquisitions_left > 0) || c.ph == phase::waiting ||
                          c.ph == phase::holding ||
                          (opts_.give_ups && (c.ph == phase::attempting || c.ph == phase::undoing));
        if (acts) choices.push_back({ci, -1});
      }
      if (choices.empty()) break;
      const auto pick = choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(rng_)];
      if (pick.node >= 0) {
        deliver(pick.c, static_cast<std::size_t>(pick.node));
        continue;
      }
      client& c = at(pick.c);
      switch (c.ph) {
        case phase::idle: start(pick.c, u(rng_) < opts_.fast_path); break;
        case phase::waiting:
          if (opts_.give_ups && u(rng_) < 0.1)
            give_up(pick.c);
          else
            retry(pick.c);
          break;
        case phase::holding:
          if (u(rng_) < 0.3) release(pick.c);
          break;
        case phase::attempting:
        case phase::undoing:
          if (u(rng_) < 0.05) abandon(pick.c);
          break;
        default: break;
      }
    }
  }

  bool all_done() const {
    return std::all_of(clients_.begin(), clients_.end(), [](const client& c) {
      return c.acquisitions_left == 0 && c.ph == phase::idle &&
             std::all_of(c.queue.begin(), c.queue.end(), [](const auto& q) { return q.empty(); });
    });
  }

  // Every command still queued runs (in a random order), with no new
  // actions: what is left when every client stopped.
  void drain() {
    for (;;) {
      std::vector<std::pair<int, std::size_t>> p;
      for (int ci = 0; ci < static_cast<int>(clients_.size()); ++ci)
        for (std::size_t i = 0; i < node_count; ++i)
          if (!at(ci).queue[i].empty()) p.emplace_back(ci, i);
      if (p.empty() || failed_) return;
      const auto [ci, i] = p[std::uniform_int_distribution<std::size_t>(0, p.size() - 1)(rng_)];
      deliver(ci, i);
    }
  }

  std::string schedule(std::size_t last = 400) const {
    std::ostringstream out;
    const std::size_t from = log_.size() > last ? log_.size() - last : 0;
    if (from > 0) out << "... (" << from << " earlier events)\n";
    for (std::size_t k = from; k < log_.size(); ++k) out << k << ": " << log_[k] << "\n";
    return out.str();
  }

  void log(std::string s) { log_.push_back(std::move(s)); }

  // Every node: no key, no line, no lease for any name.
  void check_empty() {
    for (std::size_t i = 0; i < node_count; ++i) {
      state_[i] = read_node(i);
      for (const auto& [n, s] : state_[i].names)
        if (s.key || !s.line.empty())
          violation("not empty after every client is done: n" + std::to_string(i) + ": " + describe_node(i));
    }
  }

  void violation(const std::string& what) {
    if (failed_) return;
    failed_ = true;
    log("VIOLATION: " + what);
    FAIL_CHECK(what << "\nschedule:\n" << schedule());
  }

 private:
  long long clock_us() { return base_ + 1000 * ++ticks_; }

  std::vector<std::string> script_argv(const rd::lua_script& s, const std::vector<std::string>& keys,
                                       const std::vector<std::string>& args) {
    std::vector<std::string> argv{"EVAL", std::string(s.source), std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // release_script (mode "0" release, "1" undo) or leave_script, with
  // mutex_state's ARGV: value, mode, channels.
  message holder_call(const client& c, msg_kind k, const std::string& mode) {
    std::vector<std::string> args{c.value, mode};
    args.insert(args.end(), c.lock->channels.begin(), c.lock->channels.end());
    const auto& s = k == msg_kind::leave ? rd::leave_script() : rd::release_script();
    return {k, script_argv(s, c.lock->release_keys, args), c.value, "", 0};
  }

  // waiting_line::prepare_attempt + call_for: ARGV = value, expiry, arrival,
  // lease, mode, fresh arrival, channels; "2" where we are in line (if we
  // are anywhere), "1" elsewhere, "0" for try_lock.
  message acquire_call(const client& c, std::size_t i) {
    const bool any_in = std::find(c.places.begin(), c.places.end(), place::in) != c.places.end();
    std::string mode = !c.blocking ? "0" : (any_in && c.places[i] == place::in ? "2" : "1");
    std::vector<std::string> args{
        c.value, std::to_string(long_ms),       std::to_string(c.arrival), std::to_string(c.lease_ms),
        mode,    std::to_string(c.next_arrival)};
    args.insert(args.end(), c.lock->channels.begin(), c.lock->channels.end());
    return {msg_kind::acquire, script_argv(rd::acquire_script(), c.lock->acquire_keys, args), c.value, mode,
            0};
  }

  void send(client& c, std::size_t i, message m, bool awaited) {
    m.round = awaited ? c.round : 0;
    c.queue[i].push_back(std::move(m));
  }

  void begin_attempt(int ci) {
    client& c = at(ci);
    ++c.attempts;
    ++c.round;
    c.next_arrival = clock_us();
    c.answers = {};
    c.ph = phase::attempting;
    // Progress: is this the earliest waiter, with its names free of lock
    // values on every node? Then, in line everywhere, this attempt must win.
    c.must_win = false;
    if (opts_.check_progress && c.blocking && earliest_waiter(ci) && names_free(c)) {
      ++c.free_attempts;
      max_free_attempts_ = std::max(max_free_attempts_, c.free_attempts);
      if (c.free_attempts > 2)
        violation(c.value + ": its " + std::to_string(c.free_attempts) +
                  "th attempt as the earliest waiter with the lock free (at most 2 expected)");
      c.must_win = in_line_everywhere(c);
    }
    for (std::size_t i = 0; i < node_count; ++i) {
      if (c.attempts == 1 && c.fast_first) {
        message m{msg_kind::plain_set,
                  {"SET", c.lock->names[0], c.value, "NX", "PX", std::to_string(long_ms)},
                  c.value,
                  "",
                  0};
        send(c, i, std::move(m), true);
      } else {
        send(c, i, acquire_call(c, i), true);
      }
    }
    log(c.value + " attempt " + std::to_string(c.attempts) + (c.must_win ? " (must win)" : ""));
    // waiting_line::on_attempt_sent: every node it asked to join may have it.
    if (c.blocking)
      for (auto& p : c.places)
        if (p == place::out) p = place::maybe;
  }

  bool earliest_waiter(int ci) {
    const client& w = at(ci);
    for (int o = 0; o < static_cast<int>(clients_.size()); ++o) {
      const client& c = at(o);
      if (o == ci || !c.blocking) continue;
      const bool waits = c.ph == phase::attempting || c.ph == phase::undoing || c.ph == phase::waiting;
      if (waits && c.arrival < w.arrival) return false;
    }
    return true;
  }

  // No node holds a lock value on any of c's names, and nobody believes it
  // holds one of them.
  bool names_free(const client& c) {
    for (const auto& o : clients_)
      if (o.believes && overlaps(o, c)) return false;
    for (std::size_t i = 0; i < node_count; ++i)
      for (const auto& n : c.lock->names) {
        const auto& k = state_[i].names.at(n).key;
        if (k && !is_reservation(*k)) return false;
      }
    return true;
  }

  bool in_line_everywhere(const client& c) {
    for (std::size_t i = 0; i < node_count; ++i)
      for (const auto& n : c.lock->names)
        if (!state_[i].live(n, c.value)) return false;
    return true;
  }

  static bool overlaps(const client& a, const client& b) {
    for (const auto& n : a.lock->names)
      if (std::find(b.lock->names.begin(), b.lock->names.end(), n) != b.lock->names.end()) return true;
    return false;
  }

  void on_reply(int ci, std::size_t i, const message& m, const reply& r) {
    client& c = at(ci);
    if (c.ph == phase::attempting) {
      if (m.kind == msg_kind::plain_set) {
        if (r.type == reply::kind::status) {
          c.answers[i] = answer{true, false, std::nullopt};
          c.places[i] = place::out;
        } else if (c.blocking) {
          // fast_sender: the SET lost and we wait, so the acquire script
          // follows on the same connection.
          c.queue[i].push_front(acquire_call(c, i));
          c.queue[i].front().round = c.round;
          return;
        } else {
          c.answers[i] = answer{};
        }
      } else {
        answer a;
        if (r.type == reply::kind::array) {
          a.yes = true;
          a.in_line = r.elements.size() == 5 && r.elements[4].integer == 1;
          // waiting_line::on_won
          c.places[i] = a.in_line ? place::in : place::out;
        } else if (r.type == reply::kind::integer) {
          a.code = r.integer;
        }
        c.answers[i] = a;
      }
      if (std::all_of(c.answers.begin(), c.answers.end(), [](const auto& a) { return a.has_value(); }))
        decide(ci);
    } else if (c.ph == phase::undoing || c.ph == phase::releasing) {
      c.undo_pending[i] = false;
      if (std::any_of(c.undo_pending.begin(), c.undo_pending.end(), [](bool b) { return b; })) return;
      if (c.ph == phase::releasing) {
        log(c.value + " released");
        --c.acquisitions_left;
        ++c.acquisitions_done;
        c.ph = phase::idle;
      } else {
        after_failed_attempt(c);
      }
    }
  }

  // waiting_line::on_attempt_answered, then acquisition::on_attempt.
  void decide(int ci) {
    client& c = at(ci);
    bool evicted = false;
    std::size_t yes = 0;
    for (std::size_t i = 0; i < node_count; ++i) {
      const answer& a = *c.answers[i];
      if (a.yes) {
        ++yes;
        continue;
      }
      const bool in = a.code && *a.code >= -4 && *a.code <= -1;
      c.places[i] = in ? place::in : place::out;
      if (a.code && (*a.code == -3 || *a.code == -4)) evicted = true;
    }
    if (evicted) c.arrival = c.next_arrival;
    if (yes >= quorum) {
      for (const auto& o : clients_)
        if (&o != &c && o.believes && overlaps(o, c))
          violation(c.value + " and " + o.value + " both believe they hold");
      c.believes = true;
      c.ph = phase::holding;
      log(c.value + " holds (attempt " + std::to_string(c.attempts) + ")");
      leave(c);  // confirmed: only now does it leave the lines (rule L)
      return;
    }
    if (c.must_win)
      violation(c.value + ": the earliest waiter, in every line with the lock free, lost its attempt");
    log(c.value + " failed with " + std::to_string(yes) + " yes");
    if (yes == 0) return after_failed_attempt(c);
    c.ph = phase::undoing;
    ++c.round;
    c.undo_pending.fill(false);
    for (std::size_t i = 0; i < node_count; ++i)
      if (c.answers[i]->yes) {
        send(c, i, holder_call(c, msg_kind::undo, "1"), true);
        c.undo_pending[i] = true;
      }
  }

  void after_failed_attempt(client& c) {
    if (!c.blocking) {
      leave(c);
      return finish(c);
    }
    c.ph = phase::waiting;
  }

  // waiting_line::leave: every node where it may be in line.
  void leave(client& c) {
    for (std::size_t i = 0; i < node_count; ++i) {
      if (c.places[i] == place::out) continue;
      c.places[i] = place::out;
      send(c, i, holder_call(c, msg_kind::leave, "0"), false);
    }
  }

  void finish(client& c) {
    c.ph = phase::idle;
    --c.acquisitions_left;
  }

  // ---- Checks ----

  const client* owner_of(const std::string& value) const {
    for (const auto& c : clients_)
      if (c.value == value) return &c;
    return nullptr;
  }

  // A holder's value is changed only by its own release or undo.
  void check_holder_values(std::size_t i, const node_state& before, const message& m) {
    for (const auto& [n, s] : before.names) {
      if (!s.key || is_reservation(*s.key)) continue;
      const auto& after = state_[i].names.at(n).key;
      if (after == s.key) continue;
      const bool own = (m.kind == msg_kind::release || m.kind == msg_kind::undo) && m.value == *s.key;
      if (!own)
        violation("n" + std::to_string(i) + ": " + n + " held " + *s.key + ", " + kind_name(m.kind) + " of " +
                  m.value + " made it " + (after ? show(*after) : "absent"));
    }
  }

  // Rule R, with the reservation naming the live head.
  void check_rule_r(std::size_t i) {
    if (!check_rule_r_) return;
    const node_state& s = state_[i];
    for (const auto& [n, ns] : s.names) {
      if (ns.key && !is_reservation(*ns.key)) continue;
      const auto head = s.live_head(n);
      if (!head && ns.key)
        violation("rule R, n" + std::to_string(i) + ": " + n + " is " + show(*ns.key) +
                  " with nobody live in line");
      if (head && !ns.key)
        violation("rule R, n" + std::to_string(i) + ": " + n + " is free while " + *head + " waits");
      if (head && ns.key && *ns.key != rd::reserved_value(*head))
        violation("rule R, n" + std::to_string(i) + ": " + n + " is " + show(*ns.key) +
                  ", the live head is " + *head);
    }
  }

  // Rule A (untimed: nobody is evicted): a waiter's score is its arrival.
  void check_arrivals() {
    if (!check_arrivals_) return;
    for (std::size_t i = 0; i < node_count; ++i)
      for (const auto& [n, ns] : state_[i].names)
        for (const auto& [who, score] : ns.line) {
          const client* c = owner_of(who);
          if (c && score != c->arrival && c->lease_ms == long_ms)
            violation("rule A, n" + std::to_string(i) + ": " + who + " is at " +
                      std::to_string(score - base_) + ", its arrival is " +
                      std::to_string(c->arrival - base_));
        }
  }

  // Mutual exclusion: one believer per name, whose value is on a quorum.
  void check_exclusion() {
    for (const auto& c : clients_) {
      if (!c.believes) continue;
      for (const auto& n : c.lock->names) {
        std::size_t on = 0;
        for (std::size_t i = 0; i < node_count; ++i) on += state_[i].names.at(n).key == c.value;
        if (on < quorum)
          violation(c.value + " believes it holds " + n + " but only " + std::to_string(on) +
                    " nodes have it");
      }
    }
  }

  std::string describe(const reply& r) const {
    switch (r.type) {
      case reply::kind::nil: return "nil";
      case reply::kind::integer: return std::to_string(r.integer);
      case reply::kind::status: return r.str;
      case reply::kind::error: return "ERR " + r.str;
      case reply::kind::string: return show(r.str);
      case reply::kind::array: {
        std::string s = "[";
        for (std::size_t k = 0; k < r.elements.size(); ++k) s += (k ? "," : "") + describe(r.elements[k]);
        return s + "]";
      }
    }
    return "?";
  }

  std::string describe_node(std::size_t i) const {
    std::string out;
    for (const auto& [n, s] : state_[i].names) {
      out += n.substr(0, n.find(':')) + "=" + (s.key ? show(*s.key) : "-") + " line[";
      for (const auto& [who, score] : s.line) out += who + "@" + std::to_string(score - base_) + " ";
      out += "] ";
    }
    return out;
  }

  node_state read_node(std::size_t i) {
    std::vector<std::string> argv{"EVAL", snapshot_source, std::to_string(snapshot_keys_.size())};
    argv.insert(argv.end(), snapshot_keys_.begin(), snapshot_keys_.end());
    const reply r = node(i).command(argv);
    node_state s;
    REQUIRE(r.type == reply::kind::array);
    s.now = r.elements.at(0).integer;
    for (std::size_t k = 0; k < names_.size(); ++k) {
      name_state ns;
      const auto& key = r.elements.at(1 + 3 * k);
      if (key.elements.at(0).integer == 1) ns.key = key.elements.at(1).str;
      const auto& line = r.elements.at(2 + 3 * k).elements;
      for (std::size_t e = 0; e + 1 < line.size(); e += 2)
        ns.line.emplace_back(line[e].str, static_cast<long long>(std::stod(line[e + 1].str)));
      const auto& leases = r.elements.at(3 + 3 * k).elements;
      for (std::size_t e = 0; e + 1 < leases.size(); e += 2)
        ns.leases[leases[e].str] = std::stoll(leases[e + 1].str);
      s.names[names_[k]] = std::move(ns);
    }
    return s;
  }

  explorer_options opts_;
  std::mt19937_64 rng_;
  long long base_;
  long long ticks_ = 0;
  std::vector<std::unique_ptr<redis_client>> nodes_;
  std::vector<std::string> names_;
  std::vector<std::string> snapshot_keys_;
  std::array<node_state, node_count> state_;
  std::vector<std::unique_ptr<lock_keys>> locks_;
  std::vector<client> clients_;
  std::vector<std::string> log_;
  std::size_t steps_ = 0;
  int max_free_attempts_ = 0;
  bool failed_ = false;
  bool check_arrivals_ = true;
  bool check_rule_r_ = true;
};

// Runs every queued command of client ci on every node, in node order.
void deliver_all(explorer& x, int ci) {
  for (std::size_t i = 0; i < node_count; ++i)
    while (x.pending(ci, i)) x.deliver(ci, i);
}

std::vector<std::uint64_t> seeds(std::initializer_list<std::uint64_t> fixed) {
  std::vector<std::uint64_t> s(fixed);
  if (const auto extra = env_number("REDSYNC_EXPLORER_SEED", 0))
    s.push_back(static_cast<std::uint64_t>(extra));
  return s;
}

std::size_t scaled(std::size_t steps) {
  return steps * static_cast<std::size_t>(std::max(1LL, env_number("REDSYNC_EXPLORER_SCALE", 1)));
}

}  // namespace

TEST_SUITE("line-explorer") {
  TEST_CASE(
      "random schedules of contenders that keep trying: exclusion, rule R, and everyone gets the lock") {
    cluster c(3);
    int worst = 0;
    std::size_t total = 0;
    for (const auto seed : seeds({1, 2, 3, 4, 5})) {
      MESSAGE("line-explorer progress seed " << seed);
      CAPTURE(seed);
      explorer x(c, seed);
      // Five contenders for one name, each locking over and over.
      const int acquisitions = static_cast<int>(scaled(12));
      for (int k = 0; k < 5; ++k) x.add_client("c" + std::to_string(k), {0}, true, acquisitions);
      x.run_random(100000);
      if (!x.failed()) x.drain();
      total += x.steps();
      worst = std::max(worst, x.max_free_attempts());
      for (std::size_t k = 0; k < x.client_count(); ++k)
        CHECK_MESSAGE(x.at(static_cast<int>(k)).acquisitions_done == acquisitions,
                      x.at(static_cast<int>(k)).label << " did not get the lock every time\n"
                                                      << x.schedule(60));
      if (!x.failed()) x.check_empty();
    }
    MESSAGE("line-explorer progress: " << total << " steps; the earliest waiter needed at most " << worst
                                       << " attempts with the lock free");
  }

  TEST_CASE("random schedules with give-ups, abandoned attempts, try_lock and a two-name lock stay safe") {
    cluster c(3);
    std::size_t total = 0;
    int worst = 0;
    for (const auto seed : seeds({11, 12, 13, 14, 15})) {
      MESSAGE("line-explorer safety seed " << seed);
      CAPTURE(seed);
      explorer x(c, seed, {.give_ups = true});
      x.add_client("a1", {0}, true, 1000);
      x.add_client("a2", {0}, true, 1000);
      x.add_client("ab", {0, 1}, true, 1000);
      x.add_client("b1", {1}, true, 1000);
      x.add_client("t", {0}, false, 1000);  // try_lock
      x.run_random(scaled(3000));
      if (!x.failed()) x.drain();
      total += x.steps();
      worst = std::max(worst, x.max_free_attempts());
    }
    MESSAGE("line-explorer safety: " << total << " steps; the earliest waiter needed at most " << worst
                                     << " attempts with the lock free");
  }

  TEST_CASE(
      "issue 21: a woken head that races the release and wins a minority keeps its place and its nodes") {
    cluster c(3);
    explorer x(c, 0);
    const int h = x.add_client("H", {0});
    const int w1 = x.add_client("W1", {0});
    const int w2 = x.add_client("W2", {0});
    const auto& a = x.name(0);
    x.start(h);
    deliver_all(x, h);
    REQUIRE(x.at(h).ph == phase::holding);
    x.start(w1);
    deliver_all(x, w1);  // the head everywhere: -2
    x.start(w2);
    deliver_all(x, w2);  // behind it: -1
    REQUIRE(x.at(w1).ph == phase::waiting);
    REQUIRE(x.at(w2).ph == phase::waiting);

    x.release(h);
    x.deliver(h, 0);
    CHECK(x.state(0).names.at(a).key == rd::reserved_value(x.at(w1).value));
    // W1 is woken and tries while the release is still on its way to nodes
    // 1 and 2: it wins node 0 only.
    x.retry(w1);
    CHECK(x.deliver(w1, 0).type == reply::kind::array);
    CHECK(x.deliver(w1, 1).integer == -2);
    CHECK(x.deliver(w1, 2).integer == -2);
    REQUIRE(x.at(w1).ph == phase::undoing);
    // Before its undo lands, W2 tries, and the release reaches node 1.
    x.retry(w2);
    CHECK(x.deliver(w2, 0).integer == -1);
    x.deliver(h, 1);
    CHECK(x.state(1).names.at(a).key == rd::reserved_value(x.at(w1).value));
    CHECK(x.deliver(w2, 1).integer == -1);  // reserved for W1: not W2's
    x.deliver(w1, 0);                       // the undo
    CHECK(x.state(0).names.at(a).key == rd::reserved_value(x.at(w1).value));
    CHECK(x.deliver(w2, 2).integer == -1);
    x.deliver(h, 2);
    REQUIRE(x.at(h).ph == phase::idle);
    // W1 kept its place (its arrival) on every node, and every node is
    // reserved for it: W2 wins nothing, W1 everything.
    for (std::size_t i = 0; i < node_count; ++i) {
      CHECK(x.state(i).live_head(a) == x.at(w1).value);
      CHECK(x.state(i).score(a, x.at(w1).value) == x.at(w1).arrival);
      CHECK(x.state(i).names.at(a).key == rd::reserved_value(x.at(w1).value));
    }
    x.retry(w2);
    for (std::size_t i = 0; i < node_count; ++i) CHECK(x.deliver(w2, i).integer == -1);
    x.retry(w1);
    deliver_all(x, w1);
    CHECK(x.at(w1).ph == phase::holding);
    CHECK(x.at(w1).attempts == 3);
    x.release(w1);
    deliver_all(x, w1);
    x.retry(w2);
    deliver_all(x, w2);
    CHECK(x.at(w2).ph == phase::holding);
    x.release(w2);
    deliver_all(x, w2);
    if (!x.failed()) x.check_empty();
  }

  TEST_CASE("the head of the line takes a node reserved for any waiter behind it") {
    cluster c(3);
    explorer x(c, 0);
    const int w = x.add_client("W", {0});
    const int v1 = x.add_client("V1", {0});
    const int v2 = x.add_client("V2", {0});
    const int h = x.add_client("H", {0});
    const auto& a = x.name(0);
    x.start(h);
    deliver_all(x, h);
    // W, then V1, then V2 arrive; W's first attempt reaches node 0 only
    // after the release did, so node 0 is reserved for V1 meanwhile.
    x.start(w);
    x.start(v1);
    x.start(v2);
    deliver_all(x, v1);
    deliver_all(x, v2);
    x.deliver(w, 1);
    x.deliver(w, 2);
    x.release(h);
    deliver_all(x, h);
    CHECK(x.state(0).names.at(a).key == rd::reserved_value(x.at(v1).value));
    CHECK(x.state(1).names.at(a).key == rd::reserved_value(x.at(w).value));
    // W joins node 0 ahead of V1 and takes the reservation over (it did
    // not win there: it was not the head when it asked).
    CHECK(x.deliver(w, 0).integer == -2);
    CHECK(x.state(0).names.at(a).key == rd::reserved_value(x.at(w).value));
    // W wins nodes 1 and 2 in that attempt? It asked them before the
    // release: -2 both. Its next attempt wins all three.
    REQUIRE(x.at(w).ph == phase::waiting);
    // Now reserve each node for someone behind W by hand (as a reservation
    // left for a waiter that was the head when it was made), and check that
    // W takes every one of them, and V1/V2 none.
    for (std::size_t i = 0; i < node_count; ++i) {
      const std::string who = i == 2 ? x.at(v2).value : x.at(v1).value;
      x.node(i).command({"SET", a, rd::reserved_value(who), "PX", std::to_string(long_ms)});
      x.refresh(i);
    }
    x.check_rule_r(false);  // the hand-made state names a waiter behind the head
    x.retry(v1);
    for (std::size_t i = 0; i < node_count; ++i) CHECK(x.deliver(v1, i).integer == -1);
    x.check_rule_r(true);  // V1's steps retargeted every reservation to W
    for (std::size_t i = 0; i < node_count; ++i)
      CHECK(x.state(i).names.at(a).key == rd::reserved_value(x.at(w).value));
    for (std::size_t i = 0; i < node_count; ++i) {
      const std::string who = i == 2 ? x.at(v2).value : x.at(v1).value;
      x.node(i).command({"SET", a, rd::reserved_value(who), "PX", std::to_string(long_ms)});
      x.refresh(i);
    }
    x.retry(w);
    for (std::size_t i = 0; i < node_count; ++i) CHECK(x.deliver(w, i).type == reply::kind::array);
    CHECK(x.at(w).ph == phase::holding);
  }

  TEST_CASE("a two-name waiter at the head of b's line is not overtaken on b by a newcomer's SET NX") {
    cluster c(3);
    explorer x(c, 0);
    const int h = x.add_client("H", {0});
    const int m = x.add_client("M", {0, 1});
    const int n = x.add_client("N", {1});
    const auto& b = x.name(1);
    x.start(h);
    deliver_all(x, h);
    // M waits for a (held) and is alone in b's line: b is reserved for it.
    x.start(m);
    deliver_all(x, m);
    REQUIRE(x.at(m).ph == phase::waiting);
    for (std::size_t i = 0; i < node_count; ++i)
      CHECK(x.state(i).names.at(b).key == rd::reserved_value(x.at(m).value));
    // N's first attempt is the MULTI/EXEC fast path: a plain SET NX, then
    // the acquire script where it lost.
    x.start(n, true);
    for (std::size_t i = 0; i < node_count; ++i) {
      CHECK(x.deliver(n, i).type == reply::kind::nil);  // SET b NX PX
      CHECK(x.deliver(n, i).integer == -1);             // the script: behind M
    }
    CHECK(x.at(n).ph == phase::waiting);
    x.release(h);
    deliver_all(x, h);
    x.retry(n);
    for (std::size_t i = 0; i < node_count; ++i) CHECK(x.deliver(n, i).integer == -1);
    x.retry(m);
    deliver_all(x, m);
    CHECK(x.at(m).ph == phase::holding);
    x.release(m);
    deliver_all(x, m);
    x.retry(n);
    deliver_all(x, n);
    CHECK(x.at(n).ph == phase::holding);
    x.release(n);
    deliver_all(x, n);
    if (!x.failed()) x.check_empty();
  }

  // Failed at 9fdfd4b: the acquire script checked for the head before it
  // moved a score back to ARGV's arrival, so E's next attempt won nodes 1
  // and 2 at its old rank.
  TEST_CASE("a waiter one node lost goes to the back, and does not come back at its old arrival") {
    cluster c(3);
    explorer x(c, 0);
    const int h = x.add_client("H", {0});
    const int e = x.add_client("E", {0});
    const int f = x.add_client("F", {0});
    const auto& a = x.name(0);
    x.start(h);
    deliver_all(x, h);
    x.start(e);
    deliver_all(x, e);
    x.start(f);
    deliver_all(x, f);
    const long long old_arrival = x.at(e).arrival;
    // Node 0 loses E's place (its lease ran out there first, or the node
    // lost the line): rule A moves E back on purpose.
    x.check_arrivals(false);
    x.node(0).command({"ZREM", rd::line_key(a), x.at(e).value});
    x.node(0).command({"HDEL", rd::lease_key(a), x.at(e).value});
    x.refresh(0);
    x.retry(e);
    CHECK(x.deliver(e, 0).integer == -3);  // back of the line, at this attempt's time
    CHECK(x.deliver(e, 1).integer == -2);  // the other nodes learn it with E's next attempt
    CHECK(x.deliver(e, 2).integer == -2);
    REQUIRE(x.at(e).ph == phase::waiting);
    CHECK(x.at(e).arrival > x.at(f).arrival);  // E's arrival is now the fresh one
    CHECK(x.state(0).live_head(a) == x.at(f).value);
    // The lock is released everywhere; E's next attempt carries its new
    // arrival to every node. F arrived before that: E must not be served
    // ahead of F at its old rank.
    x.release(h);
    deliver_all(x, h);
    x.retry(e);
    deliver_all(x, e);
    CHECK_MESSAGE(x.at(e).ph != phase::holding, "E came back at its old arrival ("
                                                    << old_arrival << ") on nodes 1 and 2 and took the lock "
                                                    << "ahead of F\n"
                                                    << x.schedule());
    for (std::size_t i = 0; i < node_count; ++i) {
      const auto score = x.state(i).score(a, x.at(e).value);
      if (score) CHECK(*score == x.at(e).arrival);
    }
  }

  TEST_CASE(
      "a head whose lease ran out: its reservation outlives it until the next script, which repairs R") {
    cluster c(3);
    explorer x(c, 0);
    const int h = x.add_client("H", {0});
    const int l = x.add_client("L", {0});  // a waiter with a long lease that gives up
    const int w = x.add_client("W", {0});  // a waiter with a short lease that then pauses
    const int n = x.add_client("N", {0}, false);
    const auto& a = x.name(0);
    x.start(h);
    deliver_all(x, h);
    // L joins first (the line's TTL becomes L's lease), W behind it, then L
    // gives up: the line keeps L's TTL.
    x.start(l);
    deliver_all(x, l);
    x.at(w).lease_ms = 800;
    x.start(w);
    deliver_all(x, w);
    x.give_up(l);
    deliver_all(x, l);
    x.release(h);
    deliver_all(x, h);
    for (std::size_t i = 0; i < node_count; ++i)
      CHECK(x.state(i).names.at(a).key == rd::reserved_value(x.at(w).value));
    // W pauses; wait for its lease to run out on every node's clock.
    x.check_rule_r(false);
    REQUIRE(wait_until(
        [&] {
          for (std::size_t i = 0; i < node_count; ++i) {
            x.refresh(i);
            if (x.state(i).live(a, x.at(w).value)) return false;
          }
          return true;
        },
        5s));
    // Nobody lives in the line, yet the name is still reserved for W (the
    // reservation lives as long as the line, which L's lease lengthened):
    // time breaks rule R here as well as when a holder's key expires. A
    // plain SET NX (the MULTI/EXEC fast path) is refused meanwhile.
    for (std::size_t i = 0; i < node_count; ++i) {
      CHECK(x.state(i).names.at(a).key == rd::reserved_value(x.at(w).value));
      CHECK(x.node(i).command({"SET", a, "someone", "NX", "PX", "1000"}).type == reply::kind::nil);
    }
    // The next script repairs it: a try_lock's acquire script takes the
    // name (W is gone: it evicts W and finds nobody ahead).
    x.check_rule_r(true);
    x.start(n);
    for (std::size_t i = 0; i < node_count; ++i) CHECK(x.deliver(n, i).type == reply::kind::array);
    REQUIRE(x.at(n).ph == phase::holding);
    // W comes back: it was gone, so it goes to the back of the line with
    // this attempt's time (-4: and it is the head, nobody else waits).
    x.retry(w);
    const long long fresh = x.at(w).next_arrival;
    for (std::size_t i = 0; i < node_count; ++i) CHECK(x.deliver(w, i).integer == -4);
    CHECK(x.at(w).arrival == fresh);
    x.release(n);
    deliver_all(x, n);
    x.retry(w);
    deliver_all(x, w);
    CHECK(x.at(w).ph == phase::holding);
  }
}
