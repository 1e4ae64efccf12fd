// Memory and connections: RSS of this process and connected_clients on every
// node while `locks` mutexes are held at once (all locked through lock_async
// at the same time), then after releasing them all.

#include "bench.hpp"
#include "proc.hpp"
#include "transport.hpp"

#include <redsync/redsync.hpp>

#include <atomic>
#include <future>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;

std::vector<double> clients(transport& admin) {
  std::vector<double> out;
  for (std::size_t i = 0; i < admin.size(); ++i) {
    const auto v = admin.info_field(i, "clients", "connected_clients");
    // Minus the admin connection itself.
    out.push_back(v.empty() ? -1.0 : std::stod(v) - 1.0);
  }
  return out;
}

// Runs `op` on every mutex at once and waits for all callbacks; returns the
// number of failures.
template <class Op>
std::int64_t all_at_once(std::vector<redsync::Mutex>& ms, Op op) {
  std::atomic<std::int64_t> left{static_cast<std::int64_t>(ms.size())};
  std::atomic<std::int64_t> failed{0};
  std::promise<void> done;
  for (auto& m : ms) {
    op(m, [&](redsync::result r) {
      if (!r) failed.fetch_add(1);
      if (left.fetch_sub(1) == 1) done.set_value();
    });
  }
  done.get_future().wait();
  return failed.load();
}

}  // namespace

json run_memory(const config& cfg) {
  transport admin(cfg.nodes);
  const long rss_start = rss_kib();
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  std::vector<redsync::Mutex> ms;
  ms.reserve(static_cast<std::size_t>(cfg.locks));
  for (int i = 0; i < cfg.locks; ++i) ms.push_back(rs.new_mutex(unique_name("mem")));
  const long rss_created = rss_kib();

  const auto t0 = clock::now();
  const auto lock_failures = all_at_once(
      ms, [](redsync::Mutex& m, redsync::Mutex::callback cb) { m.lock_async({}, std::move(cb)); });
  const double lock_s = std::chrono::duration<double>(clock::now() - t0).count();
  const long rss_held = rss_kib();
  const auto held_clients = clients(admin);
  const auto keys = admin.info_field(0, "keyspace", "db0");

  const auto t1 = clock::now();
  const auto unlock_failures = all_at_once(
      ms, [](redsync::Mutex& m, redsync::Mutex::callback cb) { m.unlock_async({}, std::move(cb)); });
  const double unlock_s = std::chrono::duration<double>(clock::now() - t1).count();
  const long rss_released = rss_kib();

  json j;
  j.integer("locks", cfg.locks)
      .integer("rss_kib_start", rss_start)
      .integer("rss_kib_created", rss_created)
      .integer("rss_kib_held", rss_held)
      .integer("rss_kib_released", rss_released)
      .num("bytes_per_held_lock", 1024.0 * static_cast<double>(rss_held - rss_start) / cfg.locks)
      .numbers("connected_clients_held", held_clients)
      .text("node1_keyspace_held", keys)
      .num("lock_all_s", lock_s)
      .num("unlock_all_s", unlock_s)
      .integer("lock_failures", lock_failures)
      .integer("unlock_failures", unlock_failures);
  return j;
}

}  // namespace bench
