// `redsync status NAME`: what every node holds for a lock name, who that
// holder is (for values `redsync lock` made; a name held by an RWMutex's
// readers, `redsync lock --shared`: each live reader, from the readers'
// set, not the mark they keep in the lock key), whether each node's vote
// counts yet, each node's fencing counter, and who waits in the line. A
// semaphore's name (lock -n) shows its permits instead (semaphore_status.hpp).
// A cluster member is read on the master that serves the name's slot, in
// the cluster key layout (member_probe.hpp), for a lock and a semaphore alike.

#include "args.hpp"
#include "commands.hpp"
#include "exit_status.hpp"
#include "help.hpp"
#include "holder_value.hpp"
#include "json.hpp"
#include "lock_config.hpp"
#include "lock_line.hpp"
#include "member_probe.hpp"
#include "node_command.hpp"
#include "node_list.hpp"
#include "node_probe.hpp"
#include "node_vote.hpp"
#include "semaphore_status.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace redsync::cli {
namespace {

constexpr auto status_options = with_node_options(std::array<option_spec, 6>{{
    {"value", 0, true},
    {"timeout", 0, true},
    {"ttl", 0, true},
    {"json", 0, false},
    {"permits", 'n', true},
    {"help", 'h', false},
}});

// One node, as read.
struct node_state {
  const probe_result* probe = nullptr;
  std::string error{};                 // down, or GET refused: why
  std::optional<std::string> value{};  // held: the holder's value (not the readers' mark)
  std::optional<long long> pttl_ms{};  // held with an expiry
  std::optional<bool> ours{};          // held, and --value known
  bool by_readers = false;             // held by readers: the readers' mark in the lock key
  // Held by readers: the live ones, or why the readers' set could not be read.
  std::optional<std::vector<node_reader>> readers{};
  std::string readers_error{};
  node_vote vote{};
  std::optional<long long> fence{};           // the node's fencing counter
  std::optional<std::string> reserved_for{};  // a release reserved the key for this waiter
  std::string line_error{};                   // the waiting line could not be read: why
};

// Why a node's waiting line could not be read (an error reply to TIME,
// ZRANGE or HGETALL: a user without those rights), or "" when it was.
std::string line_unreadable(const probe_reply& time, const probe_reply& members, const probe_reply& leases) {
  for (const probe_reply* r : {&time, &members, &leases})
    if (r->type == probe_reply::kind::error) return r->str;
  return {};
}

// One value found on the nodes, with how many hold it.
struct holder {
  std::string value;
  std::size_t nodes = 0;
  std::optional<holder_identity> identity{};
};

// Counts `value` as held on one more node.
void add_holder(std::vector<holder>& holders, const std::string& value) {
  auto h = holders.begin();
  while (h != holders.end() && h->value != value) ++h;
  if (h == holders.end()) {
    holders.push_back({value, 1, decode_holder_value(value)});
  } else {
    ++h->nodes;
  }
}

// "3 live readers", "1 live reader".
std::string readers_text(std::size_t n) {
  return fmt::format("{} live reader{}", n, n == 1 ? "" : "s");
}

// A reader's value for people: its tag is a control character.
std::string_view without_tag(std::string_view value) {
  return is_reader_value(value) ? value.substr(1) : value;
}

std::string identity_json(const std::optional<holder_identity>& h) {
  if (!h) return "null";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(h->since.time_since_epoch()).count();
  return fmt::format(R"({{"user":{},"host":{},"pid":{},"since_unix_ms":{}}})", json_string(h->user),
                     json_string(h->host), h->pid, ms);
}

std::string holders_json(const std::vector<holder>& holders) {
  std::string out;
  for (const auto& h : holders) {
    if (!out.empty()) out += ',';
    out += fmt::format(R"({{"value":{},"nodes":{},"holder":{}}})", json_string(h.value), h.nodes,
                       identity_json(h.identity));
  }
  return "[" + out + "]";
}

// A node's live readers, or null when readers do not hold the name there
// (or their set could not be read: readers_error says why).
std::string node_readers_json(const std::optional<std::vector<node_reader>>& readers) {
  if (!readers) return "null";
  std::string out;
  for (const auto& r : *readers) {
    if (!out.empty()) out += ',';
    out += fmt::format(R"({{"value":{},"pttl_ms":{},"holder":{}}})", json_string(r.value), r.pttl.count(),
                       identity_json(decode_holder_value(r.value)));
  }
  return "[" + out + "]";
}

}  // namespace

int run_status(std::span<char* const> argv) {
  const parsed_args args = parse_args(argv, status_options);
  if (args.has("help")) {
    std::fwrite(status_help.data(), 1, status_help.size(), stdout);
    return exit_status::ok;
  }
  if (args.has_separator) throw usage_error("status: unexpected \"--\"");
  if (args.positionals.empty()) throw usage_error("status: missing lock NAME");
  if (args.positionals.size() > 1) {
    throw usage_error(fmt::format("status: unexpected argument \"{}\"", args.positionals[1]));
  }
  const std::string& name = args.positionals[0];
  const std::vector<std::string> uris = resolve_nodes(args);
  const std::chrono::milliseconds timeout = probe_timeout(args);
  // A semaphore (lock -n): its own view, asked for with -n or found on the
  // nodes.
  std::optional<int> permits;
  if (const std::string* v = args.last("permits")) permits = parse_permits(*v);
  if (permits || is_semaphore(uris, name, timeout))
    return semaphore_status(uris, name, timeout, permits, args.has("json"));
  const std::chrono::milliseconds ttl = vote_ttl(args);
  std::optional<std::string> ours;
  if (const std::string* v = args.last("value")) {
    ours = *v;
  } else if (const char* env = std::getenv("REDSYNC_LOCK_VALUE"); env != nullptr && *env != '\0') {
    ours = env;
  }

  std::vector<std::string> shards;  // per member: a cluster member's masters, for people
  const auto results = probe_name(
      uris, name,
      [](const name_keys& keys) {
        std::vector<std::vector<std::string>> commands{{"GET", keys.lock}, {"PTTL", keys.lock}};
        for (auto& c : vote_commands(keys.record)) commands.push_back(std::move(c));
        for (auto& c : line_commands(keys.lock)) commands.push_back(std::move(c));
        commands.push_back(readers_command(keys.lock));
        return commands;
      },
      timeout, &shards);
  const auto now = std::chrono::system_clock::now();

  std::vector<node_state> nodes;
  std::vector<holder> holders;
  std::vector<holder> readers;  // each live reader, over the nodes held by readers
  std::vector<waiter> waiters;
  std::size_t unreadable_lines = 0;  // nodes whose waiting line could not be read
  std::size_t answered = 0, held = 0, held_by_us = 0, voting = 0, refused = 0;
  std::size_t held_by_readers = 0;
  for (const auto& r : results) {
    node_state s{.probe = &r};
    if (!r.up) {
      s.error = r.error;
      refused += r.refused || r.tls_refused ? 1 : 0;
      nodes.push_back(std::move(s));
      continue;
    }
    ++answered;
    s.vote = vote_of(r.replies.at(2), r.replies.at(3), r.replies.at(4), ttl);
    voting += s.vote.what == node_vote::state::votes ? 1 : 0;
    s.fence = fence_of(r.replies.at(3));
    s.line_error = line_unreadable(r.replies.at(4), r.replies.at(5), r.replies.at(6));
    if (const auto now_ms = server_ms(r.replies.at(4)); now_ms && s.line_error.empty())
      add_line(waiters, r.replies.at(5), r.replies.at(6), *now_ms);
    unreadable_lines += s.line_error.empty() ? 0 : 1;
    const probe_reply& value = r.replies.at(0);
    const probe_reply& pttl = r.replies.at(1);
    if (value.type == probe_reply::kind::error) {
      s.error = value.str;
    } else if (value.type == probe_reply::kind::string && reserved_for(value.str)) {
      // Released, and kept for the head of the line while the line lives:
      // nobody holds it.
      s.reserved_for = reserved_for(value.str);
      if (pttl.type == probe_reply::kind::integer && pttl.integer >= 0) s.pttl_ms = pttl.integer;
    } else if (value.type == probe_reply::kind::string && value.str == readers_mark) {
      // Held by readers: the mark is nobody's value; the readers' set
      // says who they are. The mark lives as long as the latest reader.
      ++held;
      ++held_by_readers;
      s.by_readers = true;
      if (pttl.type == probe_reply::kind::integer && pttl.integer >= 0) s.pttl_ms = pttl.integer;
      const probe_reply& members = r.replies.at(7);
      const auto now_ms = server_ms(r.replies.at(4));
      if (members.type == probe_reply::kind::error) {
        s.readers_error = members.str;
      } else if (!now_ms) {
        s.readers_error = "TIME unreadable";
      } else {
        s.readers = live_readers(members, *now_ms);
        for (const auto& reader : *s.readers) add_holder(readers, reader.value);
        if (ours) {
          s.ours = std::any_of(s.readers->begin(), s.readers->end(),
                               [&](const node_reader& reader) { return reader.value == *ours; });
          held_by_us += *s.ours ? 1 : 0;
        }
      }
    } else if (value.type == probe_reply::kind::string) {
      ++held;
      s.value = value.str;
      if (pttl.type == probe_reply::kind::integer && pttl.integer >= 0) s.pttl_ms = pttl.integer;
      if (ours) {
        s.ours = value.str == *ours;
        held_by_us += *s.ours ? 1 : 0;
      }
      add_holder(holders, value.str);
    }
    nodes.push_back(std::move(s));
  }
  // One server under two names votes once, under its first name (a cluster
  // member's master is not compared: its URI names the seeds).
  std::vector<const probe_reply*> infos;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    infos.push_back(nodes[i].probe->up && !is_cluster_member_uri(uris[i]) ? &nodes[i].probe->replies.at(2)
                                                                          : nullptr);
  // Nor does a Redis Cluster node listed as redis:// (node_vote.hpp).
  const std::vector<std::string> twins = same_servers(uris, infos);
  const std::vector<std::string> cluster_nodes_listed = cluster_nodes(uris, infos);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string& why = !cluster_nodes_listed[i].empty() ? cluster_nodes_listed[i] : twins[i];
    if (why.empty()) continue;
    voting -= nodes[i].vote.what == node_vote::state::votes ? 1 : 0;
    nodes[i].vote = {node_vote::state::never, why, std::nullopt};
  }
  const std::size_t n = results.size();
  const std::size_t quorum = n / 2 + 1;
  std::optional<long long> fence_max;
  for (const auto& s : nodes) {
    if (s.fence) fence_max = std::max(fence_max.value_or(*s.fence), *s.fence);
  }

  if (args.has("json")) {
    std::string node_list;
    for (const auto& s : nodes) {
      if (!node_list.empty()) node_list += ',';
      const bool up = s.probe->up;
      node_list += fmt::format(
          R"({{"address":{},"up":{},"error":{},"held":{},"pttl_ms":{},"value":{},"ours":{},"holder":{},)"
          R"("readers":{},"readers_error":{},"vote":{},"vote_reason":{},"votes_in_ms":{},"fence":{},)"
          R"("reserved_for":{},"line_error":{}}})",
          json_string(s.probe->address), json_bool(up), s.error.empty() ? "null" : json_string(s.error),
          json_bool(s.value || s.by_readers), json_number_or_null(s.pttl_ms), json_string_or_null(s.value),
          s.ours ? json_bool(*s.ours) : "null",
          identity_json(s.value ? decode_holder_value(*s.value) : std::nullopt), node_readers_json(s.readers),
          s.readers_error.empty() ? "null" : json_string(s.readers_error),
          up ? json_string(to_string(s.vote.what)) : "null",
          up && !s.vote.reason.empty() ? json_string(s.vote.reason) : "null",
          up && s.vote.votes_in ? fmt::format("{}", s.vote.votes_in->count()) : "null",
          json_number_or_null(s.fence), json_string_or_null(s.reserved_for),
          s.line_error.empty() ? "null" : json_string(s.line_error));
    }
    std::string waiting;
    for (const auto& w : waiters) {
      if (!waiting.empty()) waiting += ',';
      waiting +=
          fmt::format(R"({{"value":{},"reader":{},"holder":{},"since_unix_ms":{},"nodes":{},"lease_ms":{}}})",
                      json_string(w.value), json_bool(is_reader_value(w.value)), identity_json(w.identity),
                      w.arrival_us / 1000, w.nodes, w.lease_left.count());
    }
    // "waiting" is null when no node's line could be read: an empty list
    // would claim nobody waits.
    if (unreadable_lines > 0 && unreadable_lines == answered)
      waiting = "null";
    else
      waiting = "[" + waiting + "]";
    fmt::print(R"({{"name":{},"nodes":[{}],"holders":{},"readers":{},"held_by_readers":{},"waiting":{},)"
               R"("fence_max":{},"held":{},"ours":{},"answered":{},"voting":{},"total":{},"quorum":{}}})"
               "\n",
               json_string(name), node_list, holders_json(holders), holders_json(readers), held_by_readers,
               waiting, json_number_or_null(fence_max), held,
               ours ? fmt::format("{}", held_by_us) : std::string("null"), answered, voting, n, quorum);
  } else {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const node_state& s = nodes[i];
      const std::string& address = s.probe->address;
      if (!s.probe->up) {
        fmt::print("{}: down ({})\n{}", address, s.error, shards[i]);
        continue;
      }
      std::string line;
      if (!s.error.empty()) {
        line = fmt::format("{}: error ({})", address, s.error);
      } else if (s.reserved_for) {
        line = fmt::format(
            "{}: released, kept for the head of the line ({}) for {}", address,
            describe_waiter({*s.reserved_for, 0, 0, {}, decode_holder_value(*s.reserved_for)}),
            s.pttl_ms ? fmt::format("{} ms", *s.pttl_ms) : std::string("as long as the line lives"));
      } else if (s.readers) {
        line = fmt::format("{}: held by {}, pttl {}", address, readers_text(s.readers->size()),
                           s.pttl_ms ? fmt::format("{} ms", *s.pttl_ms) : std::string("none"));
        if (s.ours) line += *s.ours ? ", ours among them" : ", not ours";
      } else if (s.by_readers) {
        line = fmt::format("{}: held by readers (the readers' set unreadable: {})", address, s.readers_error);
      } else if (!s.value) {
        line = fmt::format("{}: absent", address);
      } else {
        line = fmt::format("{}: held, pttl {}, value \"{}\"", address,
                           s.pttl_ms ? fmt::format("{} ms", *s.pttl_ms) : std::string("none"), *s.value);
        if (s.ours) line += *s.ours ? ", ours" : ", not ours";
      }
      fmt::print("{}{}\n{}", line, vote_suffix(s.vote), shards[i]);
    }
    for (const auto& h : holders) {
      if (h.identity) {
        fmt::print("held by {} on {}/{} nodes\n", describe_holder(*h.identity, now), h.nodes, n);
      } else {
        fmt::print("held by an unknown holder (value \"{}\", not made by redsync lock) on {}/{} nodes\n",
                   h.value, h.nodes, n);
      }
    }
    for (const auto& r : readers) {
      if (r.identity) {
        fmt::print("held by reader {} on {}/{} nodes\n", describe_holder(*r.identity, now), r.nodes, n);
      } else {
        fmt::print("held by an unknown reader (value \"{}\", not made by redsync lock) on {}/{} nodes\n",
                   without_tag(r.value), r.nodes, n);
      }
    }
    for (const auto& s : nodes)
      if (s.probe->up && !s.line_error.empty())
        fmt::print("waiting line: unreadable on {} ({})\n", s.probe->address, s.line_error);
    if (waiters.empty() && unreadable_lines > 0 && unreadable_lines == answered) {
      // Nothing to say about the line: no node let us read it.
    } else if (waiters.empty()) {
      fmt::print("waiting line: nobody waits{}\n",
                 unreadable_lines > 0 ? " (on the nodes that could be read)" : "");
    } else {
      fmt::print("waiting line: {} waiting\n", waiters.size());
      for (std::size_t i = 0; i < waiters.size(); ++i) {
        const waiter& w = waiters[i];
        const std::chrono::system_clock::time_point since{std::chrono::microseconds(w.arrival_us)};
        fmt::print("  {}. {}, waiting since {}, on {}/{} nodes, lease {} ms left\n", i + 1,
                   describe_waiter(w), describe_since(since, now), w.nodes, n, w.lease_left.count());
      }
    }
    std::string fences;
    for (const auto& s : nodes) {
      if (!s.probe->up) continue;
      fences += fmt::format("{}{} {}", fences.empty() ? "" : ", ", s.probe->address,
                            s.fence ? fmt::format("{}", *s.fence) : std::string("none"));
    }
    if (!fences.empty()) fmt::print("fencing counters: {}\n", fences);
    std::string summary = fmt::format("lock \"{}\": held on {}/{} nodes", name, held, n);
    if (held_by_readers > 0 && held_by_readers == held) {
      summary = fmt::format("lock \"{}\": held by readers on {}/{} nodes", name, held, n);
    } else if (held_by_readers > 0) {
      summary += fmt::format(" (by readers on {}/{})", held_by_readers, n);
    }
    if (ours) summary += fmt::format(", ours on {}/{}", held_by_us, n);
    summary += fmt::format("; {}/{} nodes answered, {}/{} voting, quorum {}", answered, n, voting, n, quorum);
    fmt::print("{}\n", summary);
  }
  std::fflush(stdout);
  if (answered >= quorum) return exit_status::ok;
  return refused > n - quorum ? exit_status::refused : exit_status::unavailable;
}

}  // namespace redsync::cli
