#pragma once

// One member of the Redlock set that is a whole Redis Cluster: its slot map
// and one node_pool per master, and each command sent to the master that
// serves its slot. Knows slots, not locks (docs/cluster.md).
// Loop thread only (except construction).
//
// Discovery. The map is read with CLUSTER SHARDS (CLUSTER SLOTS where the
// server does not know SHARDS) from the first node that answers, the known
// masters first, then the seeds, each once; nodes whose last command or
// read got no answer are asked last. It is read on first use, after every
// MOVED, after a master did not answer (a failover may have replaced it),
// when asked (refresh_soon), and in the background when a command is sent
// more than 5 s after the last read (the failover check counts the replicas
// it lists); reads running at once are one read.
//
// Redirections. A command is sent to the pool of the slot's master, on the
// connection `route` picks (node_pool.hpp: same route, same connection, so
// the server runs them in send order), and:
//  * MOVED slot host:port: the slot moved. The map takes the new owner at
//    once (so every later command goes there, after this one), the command
//    is sent there, and the whole map is read again in the background.
//  * ASK slot host:port: the slot is being migrated and this key already
//    left: ASKING and the command go to the named node together, on one
//    connection; the map is unchanged.
// Both mean the command did not run, so sending it again cannot run it
// twice. At most `max_redirects` redirections per command; every one stays
// inside the command's timeout, which runs from send().
//  * TRYAGAIN, CLUSTERDOWN, and any other error reply: handed up unchanged
//    (status ok, an error reply), as a standalone node's are: the layers
//    above count it as a non-vote with the text as its reason.
//  * No master serves the slot (in the map read again): an error reply
//    "CLUSTERDOWN redsync: no master serves slot N (...)", likewise.
//
// Pool lifetime. A pool (its connections, reconnect timers and backoff) is
// made on first use of an address: a master of the map, a node a MOVED or
// ASK names, a seed. Masters change addresses over a process's life
// (failovers, replaced nodes, pods with new IPs, resharding onto new nodes
// and draining old ones), so keeping every pool ever made would grow
// without bound and keep reconnecting to addresses that are gone. After
// every map read, each pool whose address serves no slot in that map and
// is no seed is retired (router_pools.hpp): no later command is sent to it
// (the next one for its address gets a fresh pool, with the listeners
// below), and it is closed once nothing the router sent there is in flight
// any more, each command being bounded by its own timeout. A command in
// flight there is never failed by the map changing: it completes with its
// answer, which may be a MOVED that is followed. Events of a retired pool's
// connections are not reported (it is no master of the member any more);
// its INFO replies are (a call it ran is identified by them). The seeds'
// pools are kept: they are a fixed list, and the map is read from them
// when no known master answers. close() closes every pool, retiring ones
// too, and calls `closed` after the last.
//
// Contract (node_pool's): send() never calls `done` synchronously; `done`
// runs exactly once, on the loop thread, at the latest `timeout` after
// send() (plus one loop iteration). close() fails what is outstanding with
// `shutdown`, then calls `closed`.

#include "transport/master_changes.hpp"
#include "transport/node_pool.hpp"
#include "transport/router_pools.hpp"
#include "transport/slot_map.hpp"

#include <redsync/options.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct uv_loop_s;

namespace redsync::detail {

// What a router reports about its own work, for observability (the
// engine's telemetry counts it; docs/observability.md).
enum class router_event {
  map_read,         // a slot map was read; `masters`: its masters (host:port)
  map_read_failed,  // no node gave a map; `detail`: why
  moved,            // a MOVED was followed; `master`: the slot's new owner
  ask,              // an ASK was followed; `master`: the node asked
  tryagain,         // a TRYAGAIN reply was handed up; `master`: who said it
  clusterdown,      // a CLUSTERDOWN reply was handed up (also "no master serves slot N")
  failover,         // `master`: a shard's new master; `detail`: the old one
};
struct router_report {
  router_event what = router_event::map_read;
  std::string_view master{};
  std::string_view detail{};
  const std::vector<std::string>* masters = nullptr;  // map_read only
};
using router_listener = std::function<void(const router_report& r)>;
// A master's (or seed's) pool event (node_pool::on_event), with its host:port.
using master_listener =
    std::function<void(const std::string& address, pool_event e, std::string_view detail)>;

class cluster_router {
 public:
  static constexpr int max_redirects = 5;

  // seeds: from parse_cluster_uri (at least one); every master's pool is
  // made from the first seed's options (credentials, TLS) with the
  // master's host and port.
  cluster_router(uv_loop_s* loop, std::vector<node_options> seeds, const redsync_options& options);
  ~cluster_router();  // requires close() to have completed
  cluster_router(const cluster_router&) = delete;
  cluster_router& operator=(const cluster_router&) = delete;

  // "cluster 127.0.0.1:7000,127.0.0.1:7001": the seeds, for messages.
  const std::string& address() const noexcept { return address_; }

  // Sends `cmd`, every key of which is in `slot`, to the slot's master.
  // `replies` as node_pool::send.
  void send(std::uint16_t slot, std::uint64_t route, wire_command cmd, std::chrono::microseconds timeout,
            command_callback done, std::uint32_t replies = 1);

  // Reads the INFO of master `address` again (its live pool, any
  // connection) and hands it to the on_server_info listener: at most one
  // read per master a second; nothing when no pool is live there.
  void read_identity(const std::string& address);

  // Reads the slot map; `done` gets "" or why no node gave one. Never
  // calls `done` synchronously.
  void refresh(std::chrono::microseconds timeout, std::function<void(const std::string& error)> done);

  // Each master's handshake INFO (node_pool::on_server_info), and the INFO
  // read_identity reads, with its host:port, the address results name in
  // command_result::served_by. No INFO goes with a call: a role change
  // does not close connections, so the acquisition scripts read who ran
  // them themselves (lib/redlock/scripts/server_mark.hpp), and the engine asks for
  // read_identity when that differs from what the INFO here said.
  void on_server_info(std::function<void(const std::string& address, const reply& info)> listener) {
    info_listener_ = std::move(listener);
  }

  // Master host:port as a node of its own (the seeds' credentials and TLS
  // parameters with its address) and its TLS context (null for plain TCP),
  // for other connections to it: the wake-up listener's.
  struct endpoint {
    node_options node;
    std::shared_ptr<const tls_context> tls;
  };
  endpoint master_endpoint(const std::string& host, int port) {
    node_pool& pool = pool_at(host, port);
    node_options node = seeds_.front();
    node.host = host;
    node.port = port;
    return {std::move(node), pool.tls()};
  }

  // Observability, before the first send: what the router does, and each
  // pool's connection events (masters, and seeds read for the map).
  void on_report(router_listener listener) { report_listener_ = std::move(listener); }
  void on_master_event(master_listener listener) { master_listener_ = std::move(listener); }

  // The map as last read (no masters before the first read).
  const slot_map& map() const noexcept { return map_; }

  // How many replicas the map lists online for the shard of `slot`'s
  // master, which the failover check waits for (durable_wait.hpp); -1 when
  // unknown (no map yet, no master, or a master only a MOVED named since
  // the last map read). 0 when the map's slots are all served by one
  // shard (counted whatever its masters' health): such a cluster cannot
  // fail over on its own (a promotion needs
  // the votes of a majority of masters, and its one master is the one
  // that failed), and a replica that dies there is never marked failed, so
  // waiting for it would keep the member from voting for good.
  int replicas_of(std::uint16_t slot) const noexcept {
    const std::int32_t owner = map_.owner[slot];
    if (!have_map_ || owner == slot_map::no_master) return -1;
    const int listed = map_.masters[static_cast<std::size_t>(owner)].replicas;
    return listed > 0 && map_.shards == 1 ? 0 : listed;
  }

  // The host:port of `slot`'s master in the map (the form
  // command_result::served_by takes), or empty when none is known.
  std::string owner_address(std::uint16_t slot) const {
    const std::int32_t owner = map_.owner[slot];
    if (!have_map_ || owner == slot_map::no_master) return {};
    const cluster_master& m = map_.masters[static_cast<std::size_t>(owner)];
    return node_options{.host = m.host, .port = m.port}.address();
  }

  // Reads the map again in the background (one read for all who ask):
  // after an answer that says the map may be out of date.
  void refresh_soon() { refresh_in_background(); }

  // Pools not closed yet: live ones (one per address in use) and retired
  // ones still draining (see "Pool lifetime"), for tests and diagnostics.
  struct pool_count {
    std::size_t live = 0;
    std::size_t retiring = 0;
  };
  pool_count pools() const noexcept { return {pools_.live_count(), pools_.retiring_count()}; }

  void close(std::function<void()> closed);

 private:
  struct pending;
  using clock = std::chrono::steady_clock;

  node_pool& pool_at(const std::string& host, int port);
  void dispatch(std::shared_ptr<pending> p);
  void send_to(std::shared_ptr<pending> p, node_pool& pool, bool asking);
  void on_reply(std::shared_ptr<pending> p, node_pool& pool, command_result&& r);
  void read_map_from(std::size_t source, clock::time_point deadline, std::vector<std::string> errors);
  void finish_refresh(const std::string& error);
  // Takes a map just read, retires the pools it no longer needs, and
  // reports it (and the failovers it shows).
  void adopt_map(slot_map&& m);
  void refresh_in_background();

  uv_loop_s* loop_;
  std::vector<node_options> seeds_;
  redsync_options options_;
  std::string address_;
  router_pools pools_;
  slot_map map_;
  bool have_map_ = false;
  clock::time_point map_read_at_{};                          // when the map was last read
  std::map<std::string, clock::time_point> identity_reads_;  // read_identity: when each master's was sent
  // The nodes a refresh asks, in order, fixed when it starts.
  std::vector<std::pair<std::string, int>> sources_;
  // Nodes (host:port) whose last command or map read got no answer: a
  // refresh asks them last.
  std::set<std::string> suspects_;
  bool refreshing_ = false;
  std::vector<std::function<void(const std::string&)>> refresh_waiters_;
  bool closing_ = false;
  std::function<void(const std::string& address, const reply& info)> info_listener_;
  router_listener report_listener_;
  master_listener master_listener_;
  // The failovers between map reads (compared with the maps as read, never
  // as a MOVED changed them since: the first MOVED to a promoted replica
  // must not make it look like a master of old).
  master_changes changes_;
};

}  // namespace redsync::detail
