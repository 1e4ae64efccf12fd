// The lifetime of a cluster router's pools (cluster_router.hpp, "Pool
// lifetime") against real local clusters: a master that leaves the map has
// its pool closed once nothing is in flight there, a command in flight is
// never failed by that, failovers back and forth keep one pool per master,
// and closing the router with a pool still draining leaves no handle.
#include <doctest/doctest.h>

#include "redlock/scripts/cluster_keys.hpp"
#include "transport/cluster_router.hpp"
#include "util/cluster_slot.hpp"
#include "util/cluster_uri.hpp"

#include <redsync/redsync.hpp>

#include <uv.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "app_loop.hpp"
#include "fresh_nodes.hpp"
#include "names.hpp"
#include "redis_client.hpp"
#include "redis_cluster.hpp"
#include "router_fixture.hpp"
#include "wait.hpp"

using namespace std::chrono_literals;
using redsync::detail::cluster_name_slot;
using redsync::detail::command_result;
using redsync::detail::key_slot;
using redsync::detail::pool_event;
using redsync::detail::transport_status;
using namespace redsync::test;

namespace {

bool answered(const command_result& r) {
  return r.status == transport_status::ok && !r.value.is_error();
}

// A key whose slot master `m` serves.
std::string key_on(redis_cluster& cl, std::size_t m, const std::string& prefix) {
  for (int i = 0;; ++i) {
    std::string key = prefix + ":" + std::to_string(i);
    if (cl.owner(key_slot(key)) == m) return key;
  }
}

// The slot ranges master `m` serves, as node `asked` sees them.
std::vector<std::pair<int, int>> ranges_of(redis_cluster& cl, std::size_t m, std::size_t asked) {
  redis_client c(cl[asked]);
  std::vector<std::pair<int, int>> out;
  for (const auto& e : c.command({"CLUSTER", "SLOTS"}).elements) {
    if (e.elements.size() >= 3 && e.elements[2].elements.size() >= 2 &&
        e.elements[2].elements[1].integer == cl[m].port())
      out.emplace_back(static_cast<int>(e.elements[0].integer), static_cast<int>(e.elements[1].integer));
  }
  return out;
}

// Gives every slot of master `from` to master `to`. With `from` running,
// its keys go along (MIGRATE) and every master is told; with `from` paused,
// only the others are told (its slots hold no key the test needs), and
// `from`, once resumed, gives way to `to`'s greater epoch.
void move_all_slots(redis_cluster& cl, std::size_t from, std::size_t to, std::size_t masters) {
  const bool from_up = !cl[from].paused();
  const auto ranges = ranges_of(cl, from, to);
  REQUIRE(!ranges.empty());
  // `to` first takes the greatest epoch: `from` still claims the slots it
  // has not been told about yet, and with a greater epoch its claim would
  // win the slots back from `to`.
  {
    redis_client dst(cl[to]);
    REQUIRE(dst.command({"CLUSTER", "BUMPEPOCH"}).type != redis_client::reply::kind::error);
  }
  std::vector<std::unique_ptr<redis_client>> told;  // `to` first, as redis-cli does
  told.push_back(std::make_unique<redis_client>(cl[to]));
  for (std::size_t i = 0; i < masters; ++i) {
    if (i != to && (i != from || from_up)) told.push_back(std::make_unique<redis_client>(cl[i]));
  }
  std::unique_ptr<redis_client> src = from_up ? std::make_unique<redis_client>(cl[from]) : nullptr;
  for (const auto& [first, last] : ranges) {
    for (int slot = first; slot <= last; ++slot) {
      const std::string s = std::to_string(slot);
      if (src && src->command({"CLUSTER", "COUNTKEYSINSLOT", s}).integer > 0) {
        cl.begin_migration(static_cast<std::uint16_t>(slot), from, to);
        cl.migrate_keys(static_cast<std::uint16_t>(slot), from, to);
        cl.finish_migration(static_cast<std::uint16_t>(slot), to);
        continue;
      }
      for (auto& c : told) REQUIRE(c->command({"CLUSTER", "SETSLOT", s, "NODE", cl.id(to)}).str == "OK");
    }
  }
  if (!cl.wait_ok(20s)) {
    std::string nodes;
    for (std::size_t i = 0; i < masters; ++i) {
      if (cl[i].paused()) continue;
      redis_client c(cl[i]);
      nodes += c.command({"CLUSTER", "NODES"}).str + c.command({"CLUSTER", "INFO"}).str + "\n";
    }
    FAIL("the cluster did not settle after the move:\n" << nodes);
  }
}

std::string address_of(redis_cluster& cl, std::size_t i) {
  return "127.0.0.1:" + std::to_string(cl[i].port());
}

// A name of a lock whose slot master `m` serves.
std::string name_on(redis_cluster& cl, std::size_t m, const std::string& prefix) {
  for (int i = 0;; ++i) {
    std::string name = unique_name(prefix.c_str()) + "-" + std::to_string(i);
    if (cl.owner(cluster_name_slot(name)) == m) return name;
  }
}

}  // namespace

TEST_SUITE_BEGIN("cluster");

TEST_CASE("a master that leaves the map has its pool closed, and commands and locks keep working") {
  redis_cluster cl(cluster_config{.masters = 3});
  const std::string seed = "redis+cluster://" + address_of(cl, 0);  // the others are no seed
  router_fixture f(seed);
  const std::vector<std::string> keys{key_on(cl, 0, "leave"), key_on(cl, 1, "leave"), key_on(cl, 2, "leave")};
  for (const auto& k : keys) REQUIRE(answered(f.call({"SET", k, "v"})));
  CHECK(f.pools().live == 3);
  redsync::Redsync rs(std::vector<std::string>{seed}, fresh_nodes());
  const std::string name = name_on(cl, 2, "leave");
  auto m = rs.new_mutex(name, {.expiry = 5s});
  REQUIRE(m.lock(redsync::context::timeout(5s)).ok());
  REQUIRE(m.unlock(redsync::context::timeout(5s)).ok());

  move_all_slots(cl, 2, 1, 3);
  // The next command on a moved slot gets MOVED, which reads the map again.
  CHECK(wait_until([&] { return answered(f.call({"GET", keys[2]}, 500ms)); }, 10s));
  CHECK(f.call({"GET", keys[2]}).value.str == "v");
  CHECK(wait_until(
      [&] {
        const auto n = f.pools();
        return n.live == 2 && n.retiring == 0;
      },
      10s));
  for (const auto& k : keys) CHECK(answered(f.call({"SET", k, "w"})));
  CHECK(f.pools().live == 2);

  // The lock follows the slot to its new master; the member's stats name
  // two masters and leave the old one out.
  CHECK(wait_until([&] { return m.lock(redsync::context::timeout(2s)).ok(); }, 15s));
  CHECK(m.unlock(redsync::context::timeout(5s)).ok());
  CHECK(wait_until(
      [&] {
        const auto stats = rs.stats();
        if (stats.nodes.at(0).router.masters != 2) return false;
        for (const auto& sh : stats.nodes.at(0).shards)
          if (sh.address == address_of(cl, 2)) return false;
        return true;
      },
      10s));
}

TEST_CASE("a command in flight to a master whose pool is retired completes with its answer, never shutdown") {
  redis_cluster cl(cluster_config{.masters = 3});
  router_fixture f("redis+cluster://" + address_of(cl, 0));
  for (std::size_t m = 0; m < 3; ++m) REQUIRE(answered(f.call({"SET", key_on(cl, m, "inflight"), "v"})));
  REQUIRE(f.pools().live == 3);
  const std::string key = key_on(cl, 2, "inflight");
  cl[2].pause();
  auto pending = f.call_async({"SET", key, "w"}, 30s);
  move_all_slots(cl, 2, 1, 3);
  // A map read retires the paused master's pool (one read may go to the
  // paused master first and get no answer: the next asks it last), which
  // its command in flight keeps open.
  CHECK(wait_until(
      [&] {
        f.refresh(500ms);
        const auto n = f.pools();
        return n.live == 2 && n.retiring == 1;
      },
      15s));
  REQUIRE(pending.wait_for(0s) == std::future_status::timeout);
  cl[2].resume();
  REQUIRE(pending.wait_for(30s) == std::future_status::ready);
  const command_result r = pending.get();
  CHECK(r.status != transport_status::shutdown);
  // Run by the paused master before it heard its slots left it, or MOVED
  // there and followed to the new owner.
  CHECK(answered(r));
  CHECK((r.served_by == address_of(cl, 2) || r.served_by == address_of(cl, 1)));
  // Drained: the retired pool closes.
  CHECK(wait_until(
      [&] {
        const auto n = f.pools();
        return n.live == 2 && n.retiring == 0;
      },
      10s));
  CHECK(answered(f.call({"SET", key, "x"})));
}

TEST_CASE("failovers back and forth keep one pool per master, each new one heard from") {
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  router_fixture f("redis+cluster://" + address_of(cl, 0));
  const std::vector<std::string> keys{key_on(cl, 0, "flip"), key_on(cl, 1, "flip"), key_on(cl, 2, "flip")};
  for (const auto& k : keys) REQUIRE(answered(f.call({"SET", k, "v"})));
  REQUIRE(f.pools().live == 3);
  // Masters 1 and its replica 4 swap roles four times: the pool of each
  // address is retired when it is demoted and made again when promoted.
  for (int round = 0; round < 4; ++round) {
    const std::size_t promoted = round % 2 == 0 ? 4 : 1;
    redis_client r(cl[promoted]);
    REQUIRE(wait_until([&] { return r.info_field("replication", "master_link_status") == "up"; }, 20s));
    // TAKEOVER: no election, whose votes for the same shard would be
    // refused for twice the node timeout after the last one.
    REQUIRE(r.command({"CLUSTER", "FAILOVER", "TAKEOVER"}).str == "OK");
    REQUIRE(wait_until([&] { return r.info_field("replication", "role") == "master"; }, 20s));
    REQUIRE(cl.wait_ok(20s));
    CHECK(wait_until([&] { return answered(f.call({"SET", keys[1], "v"}, 500ms)); }, 20s));
    CHECK(wait_until(
        [&] {
          f.refresh();
          for (const auto& k : keys)
            if (!answered(f.call({"SET", k, "v"}, 500ms))) return false;
          const auto n = f.pools();
          return n.live == 3 && n.retiring == 0;
        },
        20s));
  }
  // Node 1 is a master again, on its third pool at least (a map read from
  // a node that had not heard of a failover yet may name it a master a
  // while longer, and a command then makes a pool for it): the router's
  // listeners heard each one connect, and its INFO names the server.
  int connects = 0;
  for (const auto& [address, e] : f.master_events())
    connects += address == address_of(cl, 1) && e == pool_event::connected ? 1 : 0;
  CHECK(connects >= 3);
  redis_client one(cl[1]);
  CHECK(f.run_ids()[address_of(cl, 1)] == one.info_field("server", "run_id"));
}

TEST_CASE("a master retired while unreachable and a master again later is told as reconnected") {
  // The router retires the pool of a master that left the map and makes a
  // fresh one when the address is a master again: the engine's listeners
  // hear the fresh pool, whose first connection is the address's
  // reconnection (it was last told unreachable).
  redis_cluster cl(cluster_config{.masters = 3, .replicas = 1});
  struct recorder : redsync::observer {
    std::mutex mu;
    std::vector<std::pair<redsync::node_state, std::string>> events;
    void on_node(const redsync::node_event& e) override {
      const std::lock_guard lk(mu);
      events.emplace_back(e.state, std::string(e.shard));
    }
    // Whether `shard` was told `state` after it was told `after`.
    bool told(const std::string& shard, redsync::node_state after, redsync::node_state state) {
      const std::lock_guard lk(mu);
      bool seen = false;
      for (const auto& [st, sh] : events) {
        if (sh != shard) continue;
        if (seen && st == state) return true;
        seen = seen || st == after;
      }
      return false;
    }
  };
  auto rec = std::make_shared<recorder>();
  redsync::redsync_options opts = fresh_nodes();
  opts.observer = rec;
  redsync::Redsync rs(std::vector<std::string>{"redis+cluster://" + address_of(cl, 0)}, opts);
  const std::string name = name_on(cl, 1, "retired-unreachable");
  auto m = rs.new_mutex(name, {.expiry = 2s, .tries = 1});
  const auto lock_once = [&] {
    const bool ok = m.lock(redsync::context::timeout(2s)).ok();
    if (ok) (void)m.unlock(redsync::context::timeout(2s));
    return ok;
  };
  REQUIRE(wait_until(lock_once, 10s));
  {
    redis_client c(cl[1]);
    REQUIRE(c.command({"WAIT", "1", "5000"}).integer == 1);
  }
  const std::string one = address_of(cl, 1);
  cl[1].kill();
  // Told unreachable, then its replica (node 4) is promoted and found.
  CHECK(wait_until(
      [&] {
        (void)lock_once();
        return rs.stats().nodes[0].router.failovers >= 1;
      },
      30s));
  CHECK(rec->told(one, redsync::node_state::connected, redsync::node_state::unreachable));
  cl[1].restart();  // rejoins as the replica of node 4
  redis_client back(cl[1]);
  REQUIRE(wait_until([&] { return back.info_field("replication", "master_link_status") == "up"; }, 30s));
  REQUIRE(back.command({"CLUSTER", "FAILOVER"}).str == "OK");
  REQUIRE(wait_until([&] { return back.info_field("replication", "role") == "master"; }, 20s));
  CHECK(wait_until(
      [&] {
        (void)lock_once();
        const auto s = rs.stats().nodes[0];
        for (const auto& sh : s.shards)
          if (sh.address == one && sh.connected) return true;
        return false;
      },
      20s));
  CHECK(wait_until(
      [&] { return rec->told(one, redsync::node_state::unreachable, redsync::node_state::reconnected); },
      5s));
}

TEST_CASE(
    "closing a router while a retired pool still has a command in flight closes every pool and handle") {
  redis_cluster cl(cluster_config{.masters = 3});
  app_loop app;
  auto router = std::make_unique<redsync::detail::cluster_router>(
      app.get(), redsync::detail::parse_cluster_uri("redis+cluster://" + address_of(cl, 0)),
      redsync::redsync_options{});
  app.run();
  const auto on_loop = [&](const std::function<void()>& fn) { REQUIRE(app.call(fn, 10s)); };
  const auto call = [&](const std::string& key, std::chrono::milliseconds timeout) {
    auto done = std::make_shared<std::promise<command_result>>();
    auto result = done->get_future();
    const auto wire = redsync::detail::encode_command({"SET", key, "v"});
    on_loop([&] {
      router->send(key_slot(key), 0, wire, timeout,
                   [done](command_result&& r) { done->set_value(std::move(r)); });
    });
    return result;
  };
  const auto pools = [&] {
    redsync::detail::cluster_router::pool_count n;
    on_loop([&] { n = router->pools(); });
    return n;
  };
  for (std::size_t m = 0; m < 3; ++m) {
    auto r = call(key_on(cl, m, "close"), 2000ms);
    REQUIRE(r.wait_for(5s) == std::future_status::ready);
    REQUIRE(answered(r.get()));
  }
  cl[2].pause();
  auto pending = call(key_on(cl, 2, "close"), 30000ms);
  move_all_slots(cl, 2, 1, 3);
  CHECK(wait_until(
      [&] {
        auto read = std::make_shared<std::promise<void>>();
        on_loop([&] { router->refresh(500ms, [read](const std::string&) { read->set_value(); }); });
        read->get_future().wait_for(5s);
        const auto n = pools();
        return n.live == 2 && n.retiring == 1;
      },
      15s));
  REQUIRE(pending.wait_for(0s) == std::future_status::timeout);
  // Shutdown: the retiring pool is closed too (its command fails with
  // `shutdown`, as every command outstanding at close does), and `closed`
  // runs after the last pool closed.
  std::promise<void> closed;
  on_loop([&] { router->close([&] { closed.set_value(); }); });
  REQUIRE(closed.get_future().wait_for(10s) == std::future_status::ready);
  REQUIRE(pending.wait_for(1s) == std::future_status::ready);
  CHECK(pending.get().status == transport_status::shutdown);
  on_loop([&] { router.reset(); });
  // Nothing of the router's is left on the loop: it stops, and closes.
  CHECK(app.stop(10s));
  cl[2].resume();
}
