#include "semaphore_status.hpp"

#include "exit_status.hpp"
#include "json.hpp"
#include "lock_line.hpp"
#include "member_probe.hpp"
#include "node_probe.hpp"
#include "redlock/semaphore/semaphore_quorum.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <set>

namespace redsync::cli {
namespace {

// The keys of a semaphore on one member, as include/redsync/semaphore.hpp
// and docs/cluster.md give them: redsync:sem:{NAME} on a standalone node,
// "redsync:sem:" + the name's cluster lock key on a cluster member (the
// same hash tag as the name's lock key, so the same slot).
std::string set_key(const name_keys& keys) {
  return keys.cluster ? "redsync:sem:" + keys.lock : "redsync:sem:{" + keys.lock + "}";
}
std::string permits_key(const name_keys& keys) {
  return set_key(keys) + ":permits";
}

std::optional<long long> number(std::string_view s) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// What a semaphore's live permits keep in the name's lock key
// (lib/redlock/scripts/lua/kind_mark.lua): a mutex never holds it.
constexpr std::string_view semaphore_mark{"\0redsync:semaphore\0", 19};

// A live permit on one node: its member is "<slot>:<id>", its score the
// server ms at which it expires.
struct node_permit {
  std::string id{};
  long long slot = 0;
  long long pttl_ms = 0;
};

struct node_view {
  const probe_result* probe = nullptr;
  std::string error{};                  // down, or an error reply: why
  std::optional<long long> stored_k{};  // the k its holders agreed on
  std::vector<node_permit> permits{};
};

node_view read_node(const probe_result& r) {
  node_view v{.probe = &r};
  if (!r.up) {
    v.error = r.error;
    return v;
  }
  const probe_reply& members = r.replies.at(0);
  const probe_reply& k = r.replies.at(1);
  for (const probe_reply* reply : {&members, &k, &r.replies.at(2)})
    if (reply->type == probe_reply::kind::error) v.error = reply->str;
  const auto now_ms = server_ms(r.replies.at(2));
  if (!v.error.empty() || !now_ms) return v;
  if (k.type == probe_reply::kind::string) v.stored_k = number(k.str);
  // ZRANGE WITHSCORES: member, score, member, score, ...
  for (std::size_t i = 0; i + 1 < members.elements.size(); i += 2) {
    const std::string& member = members.elements[i].str;
    const auto score = number(members.elements[i + 1].str);
    const auto colon = member.find(':');
    if (!score || colon == std::string::npos || *score <= *now_ms) continue;  // expired, or not ours
    v.permits.push_back(
        {member.substr(colon + 1), number(member.substr(0, colon)).value_or(-1), *score - *now_ms});
  }
  return v;
}

// A permit across the nodes.
struct permit_spread {
  std::string id;
  long long slot = 0;
  std::size_t nodes = 0;
};

}  // namespace

bool is_semaphore(const std::vector<std::string>& uris, const std::string& name,
                  std::chrono::milliseconds timeout) {
  bool semaphore = false;
  const auto results = probe_name(
      uris, name,
      [](const name_keys& keys) -> std::vector<std::vector<std::string>> {
        return {{"GET", keys.lock}, {"EXISTS", set_key(keys)}};
      },
      timeout);
  for (const auto& r : results) {
    if (!r.up) continue;
    // The lock key holds something other than the permits' mark (a
    // mutex's value or reservation; an error: a key of another type).
    const probe_reply& lock = r.replies.at(0);
    if (lock.type != probe_reply::kind::nil &&
        !(lock.type == probe_reply::kind::string && lock.str == semaphore_mark))
      return false;
    semaphore = semaphore || r.replies.at(1).integer > 0;
  }
  return semaphore;
}

int semaphore_status(const std::vector<std::string>& uris, const std::string& name,
                     std::chrono::milliseconds timeout, std::optional<int> permits, bool json) {
  std::vector<std::string> shards;  // per member: a cluster member's masters, for people
  const auto results = probe_name(
      uris, name,
      [](const name_keys& keys) -> std::vector<std::vector<std::string>> {
        return {{"ZRANGE", set_key(keys), "0", "-1", "WITHSCORES"}, {"GET", permits_key(keys)}, {"TIME"}};
      },
      timeout, &shards);
  std::vector<node_view> nodes;
  std::vector<permit_spread> spread;
  std::set<long long> stored;
  std::size_t answered = 0;
  std::size_t refused = 0;
  for (const auto& r : results) {
    node_view v = read_node(r);
    if (r.up) ++answered;
    refused += !r.up && (r.refused || r.tls_refused) ? 1 : 0;
    if (v.stored_k) stored.insert(*v.stored_k);
    for (const auto& p : v.permits) {
      auto it = spread.begin();
      while (it != spread.end() && it->id != p.id) ++it;
      if (it == spread.end()) {
        spread.push_back({p.id, p.slot, 1});
      } else {
        ++it->nodes;
      }
    }
    nodes.push_back(std::move(v));
  }
  const std::size_t n = results.size();
  // The quorum of -n K, else of the k the nodes store (if they agree).
  std::optional<long long> k;
  if (permits) {
    k = *permits;
  } else if (stored.size() == 1) {
    k = *stored.begin();
  }
  const std::optional<long long> quorum =
      k && *k >= 1 && *k <= detail::max_permits
          ? std::optional<long long>(
                static_cast<long long>(detail::semaphore_quorum(n, static_cast<std::size_t>(*k))))
          : std::nullopt;

  if (json) {
    std::string node_list;
    for (const auto& v : nodes) {
      std::string held;
      for (const auto& p : v.permits) {
        if (!held.empty()) held += ',';
        held += fmt::format(R"({{"id":{},"slot":{},"pttl_ms":{}}})", json_string(p.id), p.slot, p.pttl_ms);
      }
      if (!node_list.empty()) node_list += ',';
      node_list +=
          fmt::format(R"({{"address":{},"up":{},"error":{},"permits":{},"held":[{}]}})",
                      json_string(v.probe->address), json_bool(v.probe->up),
                      v.error.empty() ? "null" : json_string(v.error), json_number_or_null(v.stored_k), held);
    }
    std::string holders;
    for (const auto& p : spread) {
      if (!holders.empty()) holders += ',';
      holders += fmt::format(R"({{"id":{},"slot":{},"nodes":{}}})", json_string(p.id), p.slot, p.nodes);
    }
    fmt::print(R"({{"name":{},"semaphore":true,"permits":{},"nodes":[{}],"holders":[{}],"answered":{},)"
               R"("total":{},"quorum":{}}})"
               "\n",
               json_string(name), json_number_or_null(k), node_list, holders, answered, n,
               json_number_or_null(quorum));
  } else {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const node_view& v = nodes[i];
      const std::string& address = v.probe->address;
      if (!v.probe->up) {
        fmt::print("{}: down ({})\n", address, v.error);
      } else if (!v.error.empty()) {
        fmt::print("{}: error ({})\n", address, v.error);
      } else if (v.permits.empty()) {
        fmt::print("{}: no permit held\n", address);
      } else {
        std::string held;
        for (const auto& p : v.permits)
          held += fmt::format("{}slot {} id \"{}\" pttl {} ms", held.empty() ? "" : ", ", p.slot, p.id,
                              p.pttl_ms);
        fmt::print("{}: k {}, {} permit{}: {}\n", address,
                   v.stored_k ? fmt::format("{}", *v.stored_k) : std::string("unknown"), v.permits.size(),
                   v.permits.size() == 1 ? "" : "s", held);
      }
      fmt::print("{}", shards[i]);
    }
    for (const auto& p : spread)
      fmt::print("permit \"{}\" (slot {}) on {}/{} nodes{}\n", p.id, p.slot, p.nodes, n,
                 quorum && p.nodes >= static_cast<std::size_t>(*quorum) ? "" : " (fewer than a quorum)");
    if (permits && !stored.empty() && (stored.size() > 1 || *stored.begin() != *permits)) {
      fmt::print(
          "the nodes store k {}, not -n {}: `redsync lock -n {}` is refused while these permits live\n",
          fmt::join(stored, " and "), *permits, *permits);
    }
    fmt::print("semaphore \"{}\": {} permits, {} held; {}/{} nodes answered, quorum {}\n", name,
               k ? fmt::format("{}", *k) : std::string("unknown"), spread.size(), answered, n,
               quorum ? fmt::format("{}", *quorum) : std::string("unknown (no node stores k: give -n)"));
  }
  std::fflush(stdout);
  const std::size_t needed = quorum ? static_cast<std::size_t>(*quorum) : n / 2 + 1;
  if (answered >= needed) return exit_status::ok;
  return refused > n - needed ? exit_status::refused : exit_status::unavailable;
}

}  // namespace redsync::cli
