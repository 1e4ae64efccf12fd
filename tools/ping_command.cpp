// `redsync ping`: is every node up, how fast does it answer, does its vote
// count yet, and does the node list name each server once and in the right
// form. A cluster member is up when every slot has a master that
// answers (cluster_ping.hpp); quorum and exit status count members.

#include "args.hpp"
#include "cluster_ping.hpp"
#include "commands.hpp"
#include "exit_status.hpp"
#include "help.hpp"
#include "json.hpp"
#include "node_command.hpp"
#include "node_list.hpp"
#include "node_probe.hpp"
#include "node_vote.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <thread>

namespace redsync::cli {
namespace {

constexpr auto ping_options = with_node_options(std::array<option_spec, 4>{{
    {"timeout", 0, true},
    {"ttl", 0, true},
    {"json", 0, false},
    {"help", 'h', false},
}});

struct node_line {
  const probe_result* probe = nullptr;
  const cluster_ping* cluster = nullptr;  // a cluster member: `probe` is null
  bool up = false;
  // It answered, refusing the credentials: reachable, but no vote is read.
  bool auth_refused = false;
  std::string error{};  // why not up
  node_vote vote{};
};

void print_text(const std::vector<node_line>& lines) {
  for (const auto& l : lines) {
    if (l.cluster != nullptr) {
      fmt::print("{}", cluster_ping_text(*l.cluster));
    } else if (l.auth_refused) {
      fmt::print("{}: up, auth refused ({})\n", l.probe->address, l.error);
    } else if (l.up) {
      fmt::print("{}: up, {} us{}\n", l.probe->address, l.probe->first_reply.count(), vote_suffix(l.vote));
    } else {
      fmt::print("{}: down ({})\n", l.probe->address, l.error);
    }
  }
}

void print_json(const std::vector<node_line>& lines, std::size_t up, std::size_t voting, std::size_t quorum) {
  std::string nodes;
  for (const auto& l : lines) {
    if (!nodes.empty()) nodes += ',';
    if (l.cluster != nullptr) {
      nodes += cluster_ping_json(*l.cluster);
      continue;
    }
    const bool votes = l.up && l.vote.what == node_vote::state::votes;
    const bool read = l.up && !l.auth_refused;  // its replies were read
    // auth_refused last: consumers that match the older fields keep working.
    nodes += fmt::format(
        R"({{"address":{},"up":{},"round_trip_us":{},"error":{},"vote":{},"vote_reason":{},"votes_in_ms":{},)"
        R"("auth_refused":{}}})",
        json_string(l.probe->address), json_bool(l.up),
        read ? fmt::format("{}", l.probe->first_reply.count()) : "null", read ? "null" : json_string(l.error),
        read ? json_string(to_string(l.vote.what)) : "null",
        read && !votes ? json_string(l.vote.reason) : "null",
        l.vote.votes_in && read ? fmt::format("{}", l.vote.votes_in->count()) : "null",
        json_bool(l.auth_refused));
  }
  fmt::print(R"({{"nodes":[{}],"up":{},"voting":{},"total":{},"quorum":{}}})"
             "\n",
             nodes, up, voting, lines.size(), quorum);
}

}  // namespace

int run_ping(std::span<char* const> argv) {
  const parsed_args args = parse_args(argv, ping_options);
  if (args.has("help")) {
    std::fwrite(ping_help.data(), 1, ping_help.size(), stdout);
    return exit_status::ok;
  }
  if (args.has_separator) throw usage_error("ping: unexpected \"--\"");
  if (!args.positionals.empty()) {
    throw usage_error(fmt::format("ping: unexpected argument \"{}\"", args.positionals[0]));
  }
  const std::vector<std::string> uris = resolve_nodes(args);
  const std::chrono::milliseconds timeout = probe_timeout(args);
  const std::chrono::milliseconds ttl = vote_ttl(args);

  std::vector<std::vector<std::string>> commands{{"PING"}};
  for (auto& c : vote_commands()) commands.push_back(std::move(c));
  // Standalone nodes all at once, and each cluster member on its own thread
  // at the same time: every probe is bounded, so the slowest bounds all.
  std::vector<std::string> standalone;
  std::vector<std::size_t> cluster_at;  // indexes of the cluster members in uris
  for (std::size_t i = 0; i < uris.size(); ++i) {
    if (is_cluster_member_uri(uris[i])) {
      cluster_at.push_back(i);
    } else {
      standalone.push_back(uris[i]);
    }
  }
  std::vector<cluster_ping> clusters(cluster_at.size());
  std::vector<probe_result> results;
  {
    std::vector<std::jthread> threads;
    for (std::size_t k = 0; k < cluster_at.size(); ++k)
      threads.emplace_back([&, k] { clusters[k] = ping_cluster(uris[cluster_at[k]], timeout); });
    results = probe_all(standalone, commands, timeout);
  }  // jthreads join here
  std::vector<node_line> lines;
  std::size_t up = 0, voting = 0, refused = 0;
  for (std::size_t i = 0, next_standalone = 0, next_cluster = 0; i < uris.size(); ++i) {
    if (next_cluster < cluster_at.size() && cluster_at[next_cluster] == i) {
      const cluster_ping& c = clusters[next_cluster++];
      up += c.up || c.auth_refused ? 1 : 0;
      refused += c.auth_refused || c.tls_refused ? 1 : 0;
      lines.push_back({.cluster = &c, .up = c.up || c.auth_refused});
      continue;
    }
    const probe_result& r = results[next_standalone++];
    node_line l{.probe = &r};
    l.up = r.up && r.replies.at(0).type == probe_reply::kind::status;
    if (l.up) {
      ++up;
      l.vote = vote_of(r.replies.at(1), r.replies.at(2), r.replies.at(3), ttl);
      voting += l.vote.what == node_vote::state::votes ? 1 : 0;
    } else {
      l.error = r.up ? r.replies.at(0).str : r.error;
      refused += r.refused || r.tls_refused ? 1 : 0;
      // A node that refused the credentials answered: it is up.
      l.auth_refused = l.up = r.refused;
      up += r.refused ? 1 : 0;
    }
    lines.push_back(std::move(l));
  }
  // One server under two names votes once, under its first name.
  std::vector<const probe_reply*> infos;
  for (const auto& l : lines)
    infos.push_back(l.probe != nullptr && l.up && !l.auth_refused ? &l.probe->replies.at(1) : nullptr);
  // Node-list errors: no retry fixes them, so ping fails until the list is
  // fixed (as `lock` never counts these nodes). A Redis Cluster node listed
  // as redis:// never votes (lib/redlock/trust/node_identity.hpp); nor does one
  // server under two names (it votes once, under its first name), nor one
  // cluster under two members' seeds.
  std::size_t misnamed = 0;
  const std::vector<std::string> twins = same_servers(uris, infos);
  const std::vector<std::string> cluster_nodes_listed = cluster_nodes(uris, infos);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& why = !cluster_nodes_listed[i].empty() ? cluster_nodes_listed[i] : twins[i];
    if (why.empty()) continue;
    ++misnamed;
    voting -= lines[i].vote.what == node_vote::state::votes ? 1 : 0;
    lines[i].vote = {node_vote::state::never, why, std::nullopt};
  }
  std::vector<std::size_t> cluster_numbers;
  for (const std::size_t i : cluster_at) cluster_numbers.push_back(i + 1);
  const std::vector<std::string> same = same_clusters(clusters, cluster_numbers);
  for (std::size_t k = 0; k < clusters.size(); ++k) {
    if (same[k].empty()) continue;
    ++misnamed;
    clusters[k].never = same[k];
  }
  const std::size_t n = uris.size();
  const std::size_t quorum = n / 2 + 1;
  if (args.has("json")) {
    print_json(lines, up, voting, quorum);
  } else {
    print_text(lines);
    if (clusters.empty()) {
      fmt::print("{}/{} nodes up, {}/{} voting, quorum {}\n", up, n, voting, n, quorum);
    } else {
      fmt::print(
          "{}/{} members up, {}/{} standalone nodes voting (a cluster member votes per slot: redsync status "
          "NAME shows a name's), quorum {}\n",
          up, n, voting, standalone.size(), quorum);
    }
    if (misnamed > 0) {
      fmt::print("the node list needs fixing: {} of its {} nodes never vote{} (see above)\n", misnamed, n,
                 misnamed == 1 ? "s" : "");
    }
  }
  std::fflush(stdout);
  // Refusals first: nodes that answer but refuse, or that no retry can
  // reach (TLS), on more nodes than a quorum can spare need an operator.
  if (refused > n - quorum) return exit_status::refused;
  if (misnamed > 0) return exit_status::usage;
  if (up == n && refused == 0) return exit_status::ok;
  if (up >= quorum) return exit_status::degraded;
  return exit_status::unavailable;
}

}  // namespace redsync::cli
