// Cluster members against standalone members (issue 24), in one run so the
// ratios mean something. `--nodes` lists both kinds: redis://... standalone
// members and redis+cluster://seed,seed,... cluster members (pieces without
// a scheme continue the cluster URI before them). Figures:
//   throughput  K lockers (async API, throughput.cpp's point) on names whose
//               hash tags put them on K slots spread evenly over all 16384,
//               over the standalone members, then over the cluster members;
//   cycle       the uncontended blocking lock + unlock, standalone then
//               cluster, with server CPU per cycle, and the servers'
//               commandstats over it (commands per cycle, server time of
//               each);
//   raw         a bare SET NX PX + DEL cycle on the library's transport
//               (no Mutex code): standalone pools, then cluster routers;
//   moved       the name's slot migrated to another master of every cluster
//               member (CLUSTER SETSLOT, MIGRATE) between samples: the first
//               lock call after it against a steady one, and the commands
//               the masters received for each (commandstats, rejected calls
//               included: a MOVED is a rejected call).

#include "bench.hpp"
#include "proc.hpp"
#include "server_cpu.hpp"
#include "transport.hpp"

#include "util/cluster_slot.hpp"
#include "util/cluster_uri.hpp"

#include <redsync/redsync.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;
constexpr auto command_timeout = std::chrono::seconds{2};

// --nodes, split at every comma by main.cpp, put back together: a piece
// without "://" is one more seed of the cluster URI before it.
struct member_lists {
  std::vector<std::string> standalone, cluster;
};

member_lists split_members(const std::vector<std::string>& pieces) {
  std::vector<std::string> uris;
  for (const auto& p : pieces) {
    if (p.find("://") == std::string::npos && !uris.empty() && rd::is_cluster_uri(uris.back())) {
      uris.back() += "," + p;
    } else {
      uris.push_back(p);
    }
  }
  member_lists out;
  for (auto& u : uris) (rd::is_cluster_uri(u) ? out.cluster : out.standalone).push_back(std::move(u));
  if (out.standalone.empty() || out.cluster.empty())
    throw std::invalid_argument(
        "cluster: --nodes needs standalone (redis://) and cluster (redis+cluster://) members");
  return out;
}

// A name on `slot`: its hash tag is the slot's tag, so a cluster member
// keeps every key of it in that slot; a standalone member ignores the braces.
std::string name_on_slot(std::string_view what, std::uint16_t slot) {
  return fmt::format("{}:{{{}}}", unique_name(what), rd::slot_tag(slot));
}

// K names on K slots spread evenly over all 16384 (slot i x 16384 / K);
// both kinds of member get the same slots, under names of their own.
std::vector<std::string> names_over_all_slots(std::string_view what, int k) {
  std::vector<std::string> names;
  for (int i = 0; i < k; ++i)
    names.push_back(
        name_on_slot(what, static_cast<std::uint16_t>(static_cast<long>(i) * rd::cluster_slots / k)));
  return names;
}

// ---- one cluster member, as its servers see it ----------------------------------

struct server {
  std::string id;
  std::string address;  // host:port
  bool master = false;
};

struct cluster_admin {
  std::vector<server> servers;
  std::unique_ptr<transport> admin;  // one connection per server, in `servers` order
  std::vector<std::size_t> masters;  // indexes into servers, by address

  std::string must(std::size_t i, const std::vector<std::string_view>& argv) {
    const auto r = admin->command(i, argv, command_timeout);
    if (r.status != rd::transport_status::ok || r.value.is_error())
      throw std::runtime_error(fmt::format("cluster: {} on {}: {}", argv[0], servers[i].address,
                                           r.value.is_error() ? r.value.str : r.error));
    return r.value.str;
  }

  std::size_t owner(std::uint16_t slot) {
    // CLUSTER COUNTKEYSINSLOT answers on any node; ownership is asked of
    // each master's own view instead: the one that does not answer MOVED.
    const std::string key = fmt::format("{{{}}}", rd::slot_tag(slot));
    for (const std::size_t m : masters) {
      const auto r = admin->command(m, {"EXISTS", key}, command_timeout);
      if (r.status == rd::transport_status::ok && !r.value.is_error()) return m;
    }
    throw std::runtime_error(fmt::format("cluster: no master owns slot {}", slot));
  }

  // Moves `slot` from its master to the next master (by address), keys
  // included, and tells every master; returns the new owner.
  std::size_t migrate(std::uint16_t slot) {
    const std::size_t from = owner(slot);
    const auto at = std::find(masters.begin(), masters.end(), from);
    const std::size_t to = masters[static_cast<std::size_t>(at - masters.begin() + 1) % masters.size()];
    const std::string s = std::to_string(slot);
    must(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", servers[from].id});
    must(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", servers[to].id});
    const std::string host = servers[to].address.substr(0, servers[to].address.rfind(':'));
    const std::string port = servers[to].address.substr(servers[to].address.rfind(':') + 1);
    for (;;) {
      const auto keys = admin->command(from, {"CLUSTER", "GETKEYSINSLOT", s, "100"}, command_timeout);
      if (keys.status != rd::transport_status::ok || keys.value.elements.empty()) break;
      std::vector<std::string_view> argv{"MIGRATE", host, port, "", "0", "5000", "KEYS"};
      for (const auto& k : keys.value.elements) argv.push_back(k.str);
      const auto r = admin->command(from, argv, std::chrono::seconds{6});
      if (r.status != rd::transport_status::ok || r.value.is_error())
        throw std::runtime_error(fmt::format("cluster: MIGRATE of slot {}: {}", slot, r.value.str));
    }
    must(to, {"CLUSTER", "SETSLOT", s, "NODE", servers[to].id});
    must(from, {"CLUSTER", "SETSLOT", s, "NODE", servers[to].id});
    for (const std::size_t m : masters)
      if (m != from && m != to) must(m, {"CLUSTER", "SETSLOT", s, "NODE", servers[to].id});
    return to;
  }
};

// Reads a cluster member's servers (CLUSTER NODES of its first seed).
cluster_admin read_member(const std::string& uri) {
  const auto seed = rd::parse_cluster_uri(uri).front();
  cluster_admin c;
  {
    transport t({fmt::format("redis://{}", seed.address())});
    const auto r = t.command(0, {"CLUSTER", "NODES"}, command_timeout);
    if (r.status != rd::transport_status::ok || r.value.is_error())
      throw std::runtime_error(fmt::format("cluster: CLUSTER NODES of {}: {}", seed.address(), r.value.str));
    std::istringstream in(r.value.str);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string id, addr, flags;
      if (!(f >> id >> addr >> flags)) continue;
      addr = addr.substr(0, addr.find('@'));
      c.servers.push_back({id, addr, flags.find("master") != std::string::npos});
    }
  }
  std::sort(c.servers.begin(), c.servers.end(), [](const server& a, const server& b) {
    return a.address.size() != b.address.size() ? a.address.size() < b.address.size() : a.address < b.address;
  });
  std::vector<std::string> uris;
  for (std::size_t i = 0; i < c.servers.size(); ++i) {
    uris.push_back("redis://" + c.servers[i].address);
    if (c.servers[i].master) c.masters.push_back(i);
  }
  c.admin = std::make_unique<transport>(uris);
  return c;
}

// ---- commandstats ---------------------------------------------------------------------

struct command_stat {
  double calls = 0;  // calls + rejected_calls (a MOVED is a rejected call)
  double usec = 0;
};
using command_stats = std::map<std::string, command_stat>;

void add_commandstats(transport& admin, std::size_t i, command_stats& into) {
  const auto r = admin.command(i, {"INFO", "commandstats"});
  if (r.status != rd::transport_status::ok || r.value.is_error()) return;
  std::istringstream in(r.value.str);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cmdstat_", 0) != 0) continue;
    const auto colon = line.find(':');
    const std::string name = line.substr(8, colon - 8);
    command_stat& s = into[name];
    std::istringstream fields(line.substr(colon + 1));
    std::string field;
    while (std::getline(fields, field, ',')) {
      const auto eq = field.find('=');
      const std::string k = field.substr(0, eq);
      const double v = std::stod(field.substr(eq + 1));
      if (k == "calls" || k == "rejected_calls") s.calls += v;
      if (k == "usec") s.usec += v;
    }
  }
}

void reset_stats(transport& admin, std::size_t i) {
  const auto r = admin.command(i, {"CONFIG", "RESETSTAT"});
  if (r.status != rd::transport_status::ok || r.value.is_error())
    throw std::runtime_error("cluster: CONFIG RESETSTAT failed: " +
                             (r.value.is_error() ? r.value.str : r.error));
}

// Masters only: a replica's commandstats count what it replicates.
void reset_stats(std::vector<cluster_admin>& members) {
  for (auto& c : members)
    for (const std::size_t m : c.masters) reset_stats(*c.admin, m);
}

command_stats read_stats(std::vector<cluster_admin>& members) {
  command_stats s;
  for (auto& c : members)
    for (const std::size_t m : c.masters) add_commandstats(*c.admin, m, s);
  s.erase("config|resetstat");
  return s;
}

void reset_stats(transport& standalone) {
  for (std::size_t i = 0; i < standalone.size(); ++i) reset_stats(standalone, i);
}

command_stats read_stats(transport& standalone) {
  command_stats s;
  for (std::size_t i = 0; i < standalone.size(); ++i) add_commandstats(standalone, i, s);
  s.erase("config|resetstat");
  return s;
}

// Commands per operation, by name (what the client sent, over every member).
json per_op(const command_stats& s, double ops) {
  json j;
  for (const auto& [name, stat] : s) j.num(name, stat.calls / ops);
  return j;
}

double usec_per_call(const command_stats& s, const std::string& name) {
  const auto it = s.find(name);
  return it == s.end() || it->second.calls == 0 ? 0.0 : it->second.usec / it->second.calls;
}

// Server time per call, by command (commandstats' usec over its calls).
json server_us(const command_stats& s) {
  json j;
  for (const auto& [name, stat] : s) j.num(name, usec_per_call(s, name));
  return j;
}

// ---- the uncontended blocking cycle -------------------------------------------------------

struct cycle_run {
  samples cycle;
  json cpu;
  int failures = 0;
};

cycle_run blocking_cycles(const config& cfg, const std::vector<std::string>& members, transport& servers) {
  redsync::Redsync rs(members, bench_redsync_options());
  auto m = rs.new_mutex(name_on_slot("cl-cycle", 1234));
  precise_cpu cpu(servers);
  cycle_run out;
  out.cycle.reserve(static_cast<std::size_t>(cfg.iterations));
  for (int i = 0; i < cfg.warmup + cfg.iterations; ++i) {
    if (i == cfg.warmup) cpu.start();
    const auto t0 = clock::now();
    const auto l = m.lock(redsync::context{});
    const auto u = m.unlock(redsync::context{});
    if (i >= cfg.warmup) out.cycle.add(clock::now() - t0);
    if (!l || !u) ++out.failures;
  }
  out.cpu = cpu.stop(static_cast<std::size_t>(cfg.iterations));
  return out;
}

// ---- raw cycles on the transport: each kind's floor ---------------------------------------

// SET NX PX to every member at once, then DEL, back to back on the loop
// thread; the last `measured` cycles are timed.
struct raw_cycles {
  transport& t;
  std::uint16_t slot;
  rd::wire_command acquire;
  rd::wire_command release;
  int total;
  int measured;
  samples out{};
  int failures = 0;
  std::promise<void> finished{};

  void fan_out(const rd::wire_command& cmd, std::function<void(bool)> done) {
    auto left = std::make_shared<std::size_t>(t.size());
    auto ok = std::make_shared<bool>(true);
    for (std::size_t i = 0; i < t.size(); ++i) {
      t.member(i, slot).send(0, cmd, command_timeout, [left, ok, done](rd::command_result&& r) {
        *ok = *ok && r.status == rd::transport_status::ok && !r.value.is_error();
        if (--*left == 0) done(*ok);
      });
    }
  }
  void next(int i) {
    if (i == total) return finished.set_value();
    const auto t0 = clock::now();
    fan_out(acquire, [this, i, t0](bool locked) {
      fan_out(release, [this, i, t0, locked](bool released) {
        if (i >= total - measured) out.add(clock::now() - t0);
        if (!locked || !released) ++failures;
        next(i + 1);
      });
    });
  }
};

json raw_point(const config& cfg, transport& t, transport& servers, const std::string& label) {
  const std::uint16_t slot = 4321;
  const std::string key = name_on_slot("cl-raw", slot);
  const auto acquire = rd::encode_command({"SET", key, "raw-value", "NX", "PX", "8000"});
  const auto release = rd::encode_command({"DEL", key});
  raw_cycles warm{t, slot, acquire, release, cfg.warmup, 0};
  t.loop().post([&warm] { warm.next(0); });
  warm.finished.get_future().wait();
  raw_cycles run{t, slot, acquire, release, cfg.iterations, cfg.iterations};
  run.out.reserve(static_cast<std::size_t>(cfg.iterations));
  precise_cpu cpu(servers);
  cpu.start();
  t.loop().post([&run] { run.next(0); });
  run.finished.get_future().wait();
  json j;
  j.text("kind", label)
      .object("cycle", run.out.summary())
      .object("cpu", cpu.stop(static_cast<std::size_t>(cfg.iterations)))
      .integer("failures", run.failures);
  return j;
}

// ---- MOVED -------------------------------------------------------------------------------------

// A migrated slot brings its node record along, stamped for the old master,
// so the member does not vote for the slot's names until that record is
// repaired (docs/cluster.md, "Resharding"), even with the restart guard off.
// So each sample moves the slot on the first cluster member only (the
// others keep the quorum), after that member votes again; then the slot is
// moved on every member at once, once, to show what that costs.
json moved_section(const config& cfg, const std::vector<std::string>& members,
                   std::vector<cluster_admin>& admins) {
  const std::uint16_t slot = 777;
  redsync::Redsync rs(members, bench_redsync_options());
  auto m = rs.new_mutex(name_on_slot("cl-moved", slot));
  const int n = std::max(5, cfg.iterations / 150);
  samples steady, moved;
  command_stats steady_cmds, moved_cmds;
  int failures = 0;
  std::string first_failure;
  // One lock + unlock; the lock's time into `into`; the lock's outcome.
  const auto cycle = [&](samples* into) {
    const auto t0 = clock::now();
    auto l = m.lock(redsync::context{});
    const auto t1 = clock::now();
    const auto u = m.unlock(redsync::context{});
    if (!l || !u) {
      ++failures;
      if (first_failure.empty()) first_failure = (!l ? l : u).describe();
    }
    if (into != nullptr) into->add(t1 - t0);
    return l;
  };
  const auto excluded = [](const redsync::result& r, std::size_t i) {
    return i >= r.nodes.size() || r.nodes[i].status == redsync::node_status::excluded;
  };
  // Cycles until member `i` (every member: i == size) votes, bounded.
  const auto wait_voting = [&](std::size_t i) {
    const auto until = clock::now() + std::chrono::seconds{30};
    while (clock::now() < until) {
      const auto l = m.lock(redsync::context{});
      (void)m.unlock(redsync::context{});
      bool voting = static_cast<bool>(l);
      for (std::size_t k = 0; k < members.size(); ++k)
        if (i == members.size() || k == i) voting = voting && !excluded(l, k);
      if (voting) return;
      std::this_thread::sleep_for(std::chrono::milliseconds{100});
    }
    throw std::runtime_error("cluster: a member did not vote again within 30 s after a migration");
  };
  // The background map read a MOVED starts is sent after the call has its
  // answer: wait for it before reading the counters, so it is counted.
  const auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds{100}); };
  wait_voting(members.size());
  for (int i = 0; i < n; ++i) {
    wait_voting(0);
    for (int w = 0; w < 3; ++w) cycle(nullptr);
    reset_stats(admins);
    cycle(&steady);
    settle();
    for (const auto& [name, st] : read_stats(admins)) steady_cmds[name].calls += st.calls;
    admins.front().migrate(slot);
    reset_stats(admins);
    cycle(&moved);
    settle();
    for (const auto& [name, st] : read_stats(admins)) moved_cmds[name].calls += st.calls;
  }
  json one;
  one.integer("migrations", n)
      .object("steady_lock", steady.summary())
      .object("first_lock_after_move", moved.summary())
      .object("commands_per_steady_cycle", per_op(steady_cmds, n))
      .object("commands_per_moved_cycle", per_op(moved_cmds, n));

  // Every member at once: the first lock, and how long until one succeeds.
  wait_voting(members.size());
  for (auto& c : admins) c.migrate(slot);
  const auto t0 = clock::now();
  const auto first = m.lock(redsync::context{});
  const auto t1 = clock::now();
  (void)m.unlock(redsync::context{});
  int calls = 1;
  bool ok = static_cast<bool>(first);
  while (!ok && clock::now() - t0 < std::chrono::seconds{60}) {
    ok = static_cast<bool>(m.lock(redsync::context{}));
    (void)m.unlock(redsync::context{});
    ++calls;
  }
  const auto t2 = clock::now();
  json all;
  all.flag("first_lock_ok", static_cast<bool>(first))
      .num("first_lock_ms", std::chrono::duration<double, std::milli>(t1 - t0).count())
      .integer("first_lock_attempts", first.attempts)
      .text("first_lock_error", first ? std::string{} : first.describe())
      .integer("lock_calls_until_success", calls)
      .num("until_success_ms", std::chrono::duration<double, std::milli>(t2 - t0).count())
      .flag("succeeded", ok);

  json j;
  j.object("one_member", one)
      .object("every_member", all)
      .integer("failures_one_member", failures)
      .text("first_failure", first_failure);
  return j;
}

// The blocking cycle on the standalone members, then on the cluster
// members (server CPU from `cluster_cpu`'s processes), each kind's
// commandstats over it (the cluster's from its masters), per cycle.
struct cycles_of_both {
  json cycle;
  command_stats over_cluster_cycle;
};
cycles_of_both both_cycles(const config& cfg, const member_lists& lists, transport& standalone_servers,
                           std::vector<cluster_admin>& admins, transport& cluster_cpu) {
  reset_stats(standalone_servers);
  const cycle_run s_cycle = blocking_cycles(cfg, lists.standalone, standalone_servers);
  const command_stats over_s_cycle = read_stats(standalone_servers);
  reset_stats(admins);
  const cycle_run c_cycle = blocking_cycles(cfg, lists.cluster, cluster_cpu);
  cycles_of_both out{json{}, read_stats(admins)};
  const double cycles = cfg.warmup + cfg.iterations;  // the stats cover the warm-up too
  out.cycle.object("standalone", json{}.object("cycle", s_cycle.cycle.summary()).object("cpu", s_cycle.cpu))
      .object("cluster", json{}.object("cycle", c_cycle.cycle.summary()).object("cpu", c_cycle.cpu))
      .integer("failures", s_cycle.failures + c_cycle.failures)
      .object("standalone_commands_per_cycle", per_op(over_s_cycle, cycles))
      .object("standalone_server_us_per_call", server_us(over_s_cycle))
      .object("cluster_server_us_per_call", server_us(out.over_cluster_cycle))
      .object("cluster_commands_per_cycle", per_op(out.over_cluster_cycle, cycles));
  return out;
}

}  // namespace

json run_cluster(const config& cfg) {
  const member_lists lists = split_members(cfg.nodes);
  std::vector<cluster_admin> admins;
  std::vector<std::string> cluster_servers;
  std::vector<long> cluster_pids;
  json layout;
  int masters = 0;
  for (const auto& uri : lists.cluster) {
    admins.push_back(read_member(uri));
    masters += static_cast<int>(admins.back().masters.size());
    for (const auto& s : admins.back().servers) cluster_servers.push_back("redis://" + s.address);
    for (const long p : node_pids(*admins.back().admin)) cluster_pids.push_back(p);
  }
  transport standalone_servers(lists.standalone);
  transport cluster_admin_all(cluster_servers);
  const std::vector<long> standalone_pids = node_pids(standalone_servers);
  layout.integer("standalone_members", static_cast<std::int64_t>(lists.standalone.size()))
      .integer("cluster_members", static_cast<std::int64_t>(lists.cluster.size()))
      .integer("cluster_masters", masters)
      .integer("cluster_servers", static_cast<std::int64_t>(cluster_servers.size()));

  // Throughput: the two kinds one after the other at each K.
  std::vector<json> points;
  for (const int k : cfg.lockers) {
    for (const bool on_cluster : {false, true}) {
      config c = cfg;
      c.nodes = on_cluster ? lists.cluster : lists.standalone;
      fmt::print(stderr, "redsync_bench: cluster: throughput, {} lockers, {} members\n", k,
                 on_cluster ? "cluster" : "standalone");
      // The servers' time inside commands (commandstats, warm-up included:
      // a tenth of the window), against their processes' CPU: the rest is
      // per-request work outside commands (reading, writing, the loop).
      if (on_cluster)
        reset_stats(admins);
      else
        reset_stats(standalone_servers);
      json p = throughput_point(c, names_over_all_slots(on_cluster ? "cl-tp-c" : "cl-tp-s", k),
                                on_cluster ? cluster_pids : standalone_pids);
      const command_stats st = on_cluster ? read_stats(admins) : read_stats(standalone_servers);
      double usec = 0;
      for (const auto& [name, stat] : st) usec += stat.usec;
      const double seconds = std::chrono::duration<double>(cfg.duration).count() * 1.1;
      json point;
      point.text("members", on_cluster ? "cluster" : "standalone")
          .object("point", p)
          .num("servers_in_commands_pct", usec / (seconds * 1e6) * 100.0)
          .object("server_us_per_call", server_us(st));
      points.push_back(point);
    }
  }

  // The blocking cycle, with the cluster masters' commandstats over it.
  fmt::print(stderr, "redsync_bench: cluster: blocking cycle\n");
  auto [cycle, over_cycle] = both_cycles(cfg, lists, standalone_servers, admins, cluster_admin_all);
  cycle.num("info_server_us_per_call", usec_per_call(over_cycle, "info"))
      .num("evalsha_server_us_per_call", usec_per_call(over_cycle, "evalsha"));

  // Raw cycles: standalone pools and cluster routers, on the library's
  // transport with no Mutex code: the floor under each kind's cycle.
  fmt::print(stderr, "redsync_bench: cluster: raw cycles (the transports' floor)\n");
  std::vector<json> raw;
  {
    transport t(lists.standalone);
    raw.push_back(raw_point(cfg, t, standalone_servers, "standalone"));
  }
  {
    transport t(lists.cluster);
    raw.push_back(raw_point(cfg, t, cluster_admin_all, "cluster"));
  }

  fmt::print(stderr, "redsync_bench: cluster: MOVED\n");
  const json moved = moved_section(cfg, lists.cluster, admins);

  json j;
  j.object("layout", layout)
      .array("throughput", points)
      .object("cycle", cycle)
      .array("raw", raw)
      .object("moved", moved);
  return j;
}

json run_cluster_cycle(const config& cfg) {
  // The blocking cycle alone, for members whose masters have replicas
  // (scripts/bench --only-cluster's second pass): the failover check's WAIT
  // is then on the hot path. Server CPU is the masters' (a replica's work is
  // replicating, which the standalone members do not do), commandstats too.
  const member_lists lists = split_members(cfg.nodes);
  std::vector<cluster_admin> admins;
  std::vector<std::string> master_uris;
  std::size_t replicas = 0;
  for (const auto& uri : lists.cluster) {
    admins.push_back(read_member(uri));
    for (const std::size_t m : admins.back().masters)
      master_uris.push_back("redis://" + admins.back().servers[m].address);
    replicas += admins.back().servers.size() - admins.back().masters.size();
  }
  transport standalone_servers(lists.standalone);
  transport cluster_masters(master_uris);
  fmt::print(stderr, "redsync_bench: cluster_cycle: blocking cycle ({} masters, {} replicas)\n",
             master_uris.size(), replicas);
  json j = both_cycles(cfg, lists, standalone_servers, admins, cluster_masters).cycle;
  j.integer("cluster_masters", static_cast<std::int64_t>(master_uris.size()))
      .integer("cluster_replicas", static_cast<std::int64_t>(replicas));
  return j;
}

}  // namespace bench
