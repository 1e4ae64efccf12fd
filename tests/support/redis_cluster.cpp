#include "redis_cluster.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "redis_client.hpp"
#include "wait.hpp"

namespace redsync::test {
namespace {

using namespace std::chrono_literals;
using kind = redis_client::reply::kind;

constexpr auto form_bound = 20s;

redis_client::reply must(redis_client& c, const std::vector<std::string>& argv, const redis_server& s) {
  redis_client::reply r = c.command(argv);
  if (r.type == kind::error) {
    throw std::runtime_error("redis_cluster: " + argv.front() + " " + (argv.size() > 1 ? argv[1] : "") +
                             " on " + s.address() + ": " + r.str + "\nlog tail:\n" + s.log_tail());
  }
  return r;
}

// Port -> owner of each slot range, from CLUSTER SLOTS.
struct slot_range {
  long long first = 0;
  long long last = 0;
  int port = 0;
};

std::vector<slot_range> slot_ranges(const redis_server& s) {
  redis_client c(s, {.timeout = 1000ms});
  std::vector<slot_range> out;
  const auto r = c.command({"CLUSTER", "SLOTS"});
  if (r.type != kind::array) return out;
  for (const auto& e : r.elements) {
    if (e.elements.size() < 3 || e.elements[2].elements.size() < 2) continue;
    out.push_back(
        {e.elements[0].integer, e.elements[1].integer, static_cast<int>(e.elements[2].elements[1].integer)});
  }
  std::sort(out.begin(), out.end(),
            [](const slot_range& a, const slot_range& b) { return a.first < b.first; });
  return out;
}

bool same_ranges(const std::vector<slot_range>& a, const std::vector<slot_range>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const slot_range& x, const slot_range& y) {
    return x.first == y.first && x.last == y.last && x.port == y.port;
  });
}

}  // namespace

redis_cluster::redis_cluster(cluster_config cfg) {
  const std::size_t n = cfg.masters * (1 + cfg.replicas);
  if (cfg.masters == 0) throw std::invalid_argument("redis_cluster: masters must be at least 1");
  // The standalone `cluster` fixture starts servers concurrently; here each
  // needs its own arguments, so they start one by one (about 10 ms each).
  for (std::size_t i = 0; i < n; ++i) {
    for (int attempt = 0;; ++attempt) {
      config c = cfg.server;
      // The bus port defaults to port + 10000, which may be past 65535 or
      // taken: every node gets a free one of its own. Picked as racily as
      // the server's own port, which redis_server retries itself; a bus
      // port taken in between is retried here with another.
      const int bus_port = free_port();
      std::vector<std::string> args = {"--cluster-enabled",
                                       "yes",
                                       "--cluster-config-file",
                                       "nodes.conf",
                                       "--cluster-node-timeout",
                                       std::to_string(cfg.node_timeout_ms),
                                       "--cluster-port",
                                       std::to_string(bus_port),
                                       "--cluster-replica-validity-factor",
                                       "0"};
      args.insert(args.end(), c.extra_args.begin(), c.extra_args.end());
      c.extra_args = std::move(args);
      try {
        servers_.push_back(std::make_unique<redis_server>(std::move(c)));
        bus_ports_.push_back(bus_port);
        break;
      } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        if (attempt >= 4 || what.find("(cluster)") == std::string::npos) throw;
      }
    }
  }
  form(cfg);
}

void redis_cluster::form(const cluster_config& cfg) {
  std::vector<std::unique_ptr<redis_client>> clients;
  for (auto& s : servers_) {
    clients.push_back(std::make_unique<redis_client>(*s));
    ids_.push_back(must(*clients.back(), {"CLUSTER", "MYID"}, *s).str);
  }
  for (std::size_t k = 0; k < cfg.masters; ++k) {
    // Distinct epochs before the nodes meet, so no collision has to be
    // resolved first.
    must(*clients[k], {"CLUSTER", "SET-CONFIG-EPOCH", std::to_string(k + 1)}, *servers_[k]);
    const std::size_t first = k * 16384 / cfg.masters;
    const std::size_t last = (k + 1) * 16384 / cfg.masters - 1;
    must(*clients[k], {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first), std::to_string(last)},
         *servers_[k]);
  }
  for (std::size_t i = 1; i < servers_.size(); ++i) {
    // The bus port is not port + 10000, so MEET must name it.
    must(*clients[i],
         {"CLUSTER", "MEET", "127.0.0.1", std::to_string(servers_[0]->port()), std::to_string(bus_ports_[0])},
         *servers_[i]);
  }
  for (std::size_t i = cfg.masters; i < servers_.size(); ++i) {
    const std::size_t master = (i - cfg.masters) / cfg.replicas;
    // REPLICATE needs the master in this node's table: poll until gossip
    // brought it.
    const bool done = wait_until(
        [&] {
          return clients[i]->command({"CLUSTER", "REPLICATE", ids_[master]}).type != kind::error;
        },
        std::chrono::duration_cast<std::chrono::milliseconds>(form_bound));
    if (!done) throw std::runtime_error("redis_cluster: " + servers_[i]->address() + " could not replicate");
  }
  if (!wait_ok(std::chrono::duration_cast<std::chrono::milliseconds>(form_bound))) {
    throw std::runtime_error(
        "redis_cluster: the cluster did not reach cluster_state:ok within 20 s; log of node 0:\n" +
        servers_[0]->log_tail());
  }
  for (std::size_t i = cfg.masters; i < servers_.size(); ++i) {
    const bool up =
        wait_until([&] { return clients[i]->info_field("replication", "master_link_status") == "up"; },
                   std::chrono::duration_cast<std::chrono::milliseconds>(form_bound));
    if (!up) throw std::runtime_error("redis_cluster: replica " + servers_[i]->address() + " never synced");
  }
  // Every node's CLUSTER SHARDS calls every replica "online" (a node says
  // "loading" of a replica until gossip told it its offset): a client's
  // first map then counts every replica, as the failover check needs
  // (lib/redlock/trust/durable_wait.hpp).
  const std::size_t replicas = servers_.size() - cfg.masters;
  auto online_replicas = [&](redis_client& c) {
    std::size_t n = 0;
    for (const auto& shard : c.command({"CLUSTER", "SHARDS"}).elements) {
      for (std::size_t f = 0; f + 1 < shard.elements.size(); f += 2) {
        if (shard.elements[f].str != "nodes") continue;
        for (const auto& node : shard.elements[f + 1].elements) {
          std::string role, health;
          for (std::size_t g = 0; g + 1 < node.elements.size(); g += 2) {
            if (node.elements[g].str == "role") role = node.elements[g + 1].str;
            if (node.elements[g].str == "health") health = node.elements[g + 1].str;
          }
          n += role == "replica" && health == "online" ? 1 : 0;
        }
      }
    }
    return n;
  };
  for (std::size_t i = 0; i < servers_.size() && replicas > 0; ++i) {
    const bool online = wait_until([&] { return online_replicas(*clients[i]) == replicas; },
                                   std::chrono::duration_cast<std::chrono::milliseconds>(form_bound));
    if (!online)
      throw std::runtime_error("redis_cluster: " + servers_[i]->address() +
                               " never saw every replica online");
  }
}

std::string redis_cluster::uri() const {
  std::string auth = servers_[0]->password().empty() ? "" : ":" + servers_[0]->password() + "@";
  std::string out = "redis+cluster://" + auth;
  for (std::size_t i = 0; i < servers_.size(); ++i) out += (i == 0 ? "" : ",") + servers_[i]->address();
  return out;
}

std::size_t redis_cluster::owner(std::uint16_t slot, std::size_t asked) const {
  for (const slot_range& r : slot_ranges(*servers_.at(asked))) {
    if (slot < r.first || slot > r.last) continue;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      if (servers_[i]->port() == r.port) return i;
    }
  }
  throw std::runtime_error("redis_cluster: node " + std::to_string(asked) + " knows no owner of slot " +
                           std::to_string(slot));
}

std::string redis_cluster::describe(std::uint16_t slot) const {
  std::string out;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    const redis_server& s = *servers_[i];
    out += "node " + std::to_string(i) + " (" + s.address() + ", id " + ids_.at(i).substr(0, 8) + "): ";
    if (!s.running()) {
      out += "stopped\n";
      continue;
    }
    if (s.paused()) {
      out += "paused\n";
      continue;
    }
    try {
      redis_client c(s, {.timeout = 1000ms});
      out += "role " + c.info_field("replication", "role") + ", link " +
             c.info_field("replication", "master_link_status") + ", slot " + std::to_string(slot) + " at ";
      try {
        out += "node " + std::to_string(owner(slot, i));
      } catch (const std::runtime_error&) {
        out += "nobody";
      }
      out += "\n" + c.command({"CLUSTER", "NODES"}).str;
    } catch (const std::runtime_error& e) {
      out += std::string("no answer: ") + e.what() + "\n";
    }
  }
  return out;
}

bool redis_cluster::wait_ok(std::chrono::milliseconds bound) const {
  return wait_until(
      [&] {
        std::vector<slot_range> first;
        bool have_first = false;
        for (const auto& s : servers_) {
          if (!s->running() || s->paused()) continue;
          try {
            redis_client c(*s, {.timeout = 1000ms});
            if (c.info_field("cluster", "cluster_enabled") != "1") return false;
            const auto info = c.command({"CLUSTER", "INFO"});
            if (info.str.find("cluster_state:ok") == std::string::npos) return false;
          } catch (const std::runtime_error&) {
            return false;
          }
          auto ranges = slot_ranges(*s);
          if (!have_first) {
            first = std::move(ranges);
            have_first = true;
          } else if (!same_ranges(first, ranges)) {
            return false;
          }
        }
        return have_first;
      },
      bound);
}

void redis_cluster::begin_migration(std::uint16_t slot, std::size_t from, std::size_t to) {
  redis_client dst(*servers_.at(to));
  redis_client src(*servers_.at(from));
  must(dst, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", ids_.at(from)}, *servers_[to]);
  must(src, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", ids_.at(to)}, *servers_[from]);
}

void redis_cluster::migrate_keys(std::uint16_t slot, std::size_t from, std::size_t to,
                                 const std::vector<std::string>& keys) {
  redis_client src(*servers_.at(from));
  std::vector<std::string> names = keys;
  if (names.empty()) {
    for (const auto& k :
         must(src, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "1000"}, *servers_[from]).elements) {
      names.push_back(k.str);
    }
  }
  if (names.empty()) return;
  std::vector<std::string> argv = {"MIGRATE", "127.0.0.1", std::to_string(servers_[to]->port()),
                                   "",        "0",         "5000"};
  if (!servers_[to]->password().empty()) argv.insert(argv.end(), {"AUTH", servers_[to]->password()});
  argv.push_back("KEYS");
  argv.insert(argv.end(), names.begin(), names.end());
  must(src, argv, *servers_[from]);
}

void redis_cluster::finish_migration(std::uint16_t slot, std::size_t to) {
  // The importing node first, then the rest (as redis-cli does), so the
  // slot is never without an owner that accepts it.
  redis_client dst(*servers_.at(to));
  must(dst, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", ids_.at(to)}, *servers_[to]);
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    if (i == to || !servers_[i]->running()) continue;
    redis_client c(*servers_[i]);
    if (c.info_field("replication", "role") != "master") continue;
    must(c, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", ids_.at(to)}, *servers_[i]);
  }
}

}  // namespace redsync::test
