// One round: the same command to every node at once, each answer
// classified, a single report.

#include "redlock/engine/round.hpp"

#include <algorithm>
#include <array>
#include <numeric>

namespace redsync::detail {

server_error classify_server_error(std::string_view m) noexcept {
  // A handshake failure reads "AUTH failed: WRONGPASS ...": classify the reply.
  if (const auto colon = m.find(": "); m.starts_with("AUTH failed") && colon != std::string_view::npos)
    m.remove_prefix(colon + 2);
  const auto word = m.substr(0, m.find(' '));
  if (word == "WRONGTYPE") return server_error::wrongtype;
  // Redis refuses long commands from unauthenticated clients with a
  // protocol error before it would say NOAUTH.
  if (word == "NOAUTH" || m.find("unauthenticated") != std::string_view::npos) return server_error::noauth;
  if (word == "WRONGPASS" || m.find("invalid password") != std::string_view::npos ||
      m.find("invalid username-password") != std::string_view::npos)
    return server_error::wrongpass;
  // Inside a script, Redis 7.0 words an ACL refusal as "ERR The user
  // executing the script can't ..." and 7.2 / Valkey as "ERR ACL failure in
  // script: ...".
  if (word == "NOPERM" || m.find("The user executing the script can't") != std::string_view::npos ||
      m.find("ACL failure in script") != std::string_view::npos)
    return server_error::noperm;
  if (word == "OOM") return server_error::oom;
  if (word == "READONLY") return server_error::readonly;
  if (word == "LOADING") return server_error::loading;
  if (word == "BUSY") return server_error::busy;
  if (word == "NOSCRIPT") return server_error::noscript;
  return server_error::other;
}

namespace {

struct round_state {
  engine* eng = nullptr;
  std::weak_ptr<int> eng_alive;  // the engine (and what spec captured of it) may be gone
  round_spec spec;
  tally counts;
  std::function<void(tally&&)> done;
  bool reported = false;

  bool decided() const noexcept {
    const auto& c = counts;
    if (c.ok >= spec.quorum) return true;
    return c.ok + c.pending < spec.quorum;
  }

  void on_answer(std::size_t i, command_result&& r) {
    // After the engine is gone (destroyed on its application-owned loop's
    // thread while the pools drain), nobody awaits the round: the operation
    // was finished at shutdown, and spec.exclude_yes and the telemetry
    // would reach into the freed engine.
    if (reported || eng_alive.expired()) return;
    node_result& n = counts.nodes[i];
    n.latency = r.latency;
    n.shard = r.served_by;
    switch (r.status) {
      case transport_status::ok:
        if (r.value.is_error()) {
          n.status = node_status::reply_error;
          if (r.error.empty()) {
            n.error_class = classify_server_error(r.value.str);
            n.message = std::move(r.value.str);
          } else {
            // The connection's handshake failed (e.g. AUTH: WRONGPASS): that
            // is the cause; the command's own NOAUTH is the symptom.
            n.error_class = classify_server_error(r.error);
            if (n.error_class == server_error::other) n.error_class = classify_server_error(r.value.str);
            n.message = std::move(r.error) + " (then: " + r.value.str + ")";
          }
        } else {
          n.status = spec.classify(r.value);
          if (r.value.type == reply::kind::integer) {
            counts.integers[i] = r.value.integer;
          } else if (r.value.type == reply::kind::array && !r.value.elements.empty() &&
                     r.value.elements[0].type == reply::kind::integer) {
            counts.integers[i] = r.value.elements[0].integer;
          }
          if (n.status == node_status::taken && spec.other_kind && spec.other_kind(r.value)) {
            const std::string why = spec.other_kind_why ? *spec.other_kind_why : std::string();
            if (counts.other_kind++ == 0) counts.other_kind_why = why;
            n.message = why;
          }
          if (n.status == node_status::ok && spec.exclude_yes &&
              spec.exclude_yes(i, r.value, r.served_by, counts.nodes, n.message))
            n.status = node_status::excluded;
          if (n.status == node_status::reply_error) {
            n.error_class = server_error::other;
            n.message = "unexpected reply";
          }
        }
        // A Redis Cluster node listed as a standalone node: whatever it
        // answered (CROSSSLOT, or a yes from the one master of a name whose
        // keys share a slot), it never votes, and the reason says what to
        // list instead.
        if (const std::string& why = eng->cluster_node(i); !why.empty()) {
          n.status = node_status::excluded;
          n.error_class = server_error::none;
          n.message = why;
          eng->telemetry().vote(i, true, why);
        }
        break;
      case transport_status::timeout:
        n.status = node_status::timeout;
        n.message = r.error.empty() ? "no answer within the command timeout" : std::move(r.error);
        break;
      case transport_status::unreachable:
      case transport_status::shutdown:
        n.status = node_status::unreachable;
        n.message = std::move(r.error);
        break;
    }
    --counts.pending;
    eng->telemetry().answer(i, n.status, n.latency, n.shard);
    switch (n.status) {
      case node_status::ok: ++counts.ok; break;
      case node_status::taken: ++counts.taken; break;
      case node_status::missing: ++counts.missing; break;
      case node_status::excluded: ++counts.excluded; break;
      default: ++counts.failed; break;
    }
    if (counts.pending == 0 || (spec.fail_fast && decided())) report();
  }

  void report() {
    reported = true;
    auto d = std::move(done);
    d(std::move(counts));
  }
};

}  // namespace

void run_round(engine& eng, round_spec spec, std::function<void(tally&&)> done) {
  const std::size_t n = eng.size();
  auto st = std::make_shared<round_state>();
  st->eng = &eng;
  st->eng_alive = eng.alive();
  st->spec = std::move(spec);
  st->done = std::move(done);
  st->counts.nodes.resize(n);
  st->counts.integers.assign(n, 0);
  // The send order: node order, or shuffled (shuffle_nodes). Up to 16 nodes
  // it lives on the stack (a vector was one more malloc per round).
  constexpr std::size_t inline_nodes = 16;
  std::array<std::size_t, inline_nodes> order_small;
  std::vector<std::size_t> order_big;
  std::size_t* order = order_small.data();
  if (n > inline_nodes) {
    order_big.resize(n);
    order = order_big.data();
  }
  std::iota(order, order + n, std::size_t{0});
  if (st->spec.shuffle) std::shuffle(order, order + n, eng.rng());
  for (std::size_t i = 0; i < n; ++i) {
    st->counts.nodes[i].address = eng.addresses()[i];
    if (!st->spec.excluded.empty() && st->spec.excluded[i]) {
      st->counts.nodes[i].status = node_status::excluded;
      if (i < st->spec.excluded_why.size()) st->counts.nodes[i].message = st->spec.excluded_why[i];
      ++st->counts.excluded;
    } else {
      ++st->counts.pending;
    }
  }
  if (st->counts.pending == 0 || (st->spec.fail_fast && st->decided())) {
    // Nothing to ask: report on the next loop turn, never inside this call.
    eng.loop().post([st] { st->report(); });
    return;
  }
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = order[k];
    if (st->counts.nodes[i].status == node_status::excluded) continue;
    st->spec.send(i, eng.at(i, st->spec.slot),
                  [st, i](command_result&& r) { st->on_answer(i, std::move(r)); });
  }
}

}  // namespace redsync::detail
