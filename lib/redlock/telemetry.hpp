#pragma once

// What a Redsync tells about itself: the counters behind Redsync::stats(),
// the observer's events and the log hook's messages (include/redsync/
// observer.hpp, stats.hpp).
//
// Counters are relaxed atomics written on the loop thread and read by
// snapshot() from any thread: no lock and no hop to the loop, so stats() can
// be called from an observer callback or any other thread without deadlock.
// Each counter is exact; a snapshot is not one instant (two counters may be
// an event apart), which counters do not need.
//
// Events and log messages are delivered on the loop thread, synchronously,
// at the point of the event, never while a library lock is held (callers
// release mutex_state::mu first). A throwing callback is caught and counted.
// With no observer set, an event costs one pointer test after its counters:
// nothing is allocated and no message is formatted unless a log hook is set.
//
// Shared (shared_ptr) with the node pools' listeners, which may outlive the
// engine while the pools close (engine.cpp); close() silences it then.

#include "transport/cluster_router.hpp"
#include "transport/node_pool.hpp"

#include <redsync/error.hpp>
#include <redsync/observer.hpp>
#include <redsync/stats.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

struct mutex_state;
struct semaphore_state;
struct permit_state;

class telemetry {
 public:
  using clock = std::chrono::steady_clock;

  // A node that reconnects this often within the window is in a reconnect
  // storm (flapping network, a proxy or server dropping clients): warned.
  static constexpr std::size_t storm_reconnects = 5;
  static constexpr std::chrono::seconds storm_window{60};

  telemetry(std::vector<std::string> addresses, std::shared_ptr<observer> obs, log_hook log);
  telemetry(const telemetry&) = delete;
  telemetry& operator=(const telemetry&) = delete;

  // Any thread.
  stats_snapshot snapshot() const;

  // ---- loop thread ----
  // A call of a mutex finished with `r` (before its caller is answered).
  void acquisition(const mutex_state& st, bool blocking, const result& r);
  void release(const mutex_state& st, const result& r);
  void extension(const mutex_state& st, bool automatic, const result& r);
  void lost(const mutex_state& st, const result& r);
  // The same for a semaphore's permits. `p` is the permit granted, or the
  // last attempt's (null if none was made) on failure.
  void permit_acquisition(const semaphore_state& sem, const permit_state* p, bool blocking, const result& r);
  void permit_release(const permit_state& p, const result& r);
  void permit_extension(const permit_state& p, bool automatic, const result& r);
  void permit_lost(const permit_state& p, const result& r);
  // Node i answered a round of a lock call (hot path: counters only);
  // `shard`: the master of a cluster member that answered (served_by).
  void answer(std::size_t i, node_status s, std::chrono::microseconds latency,
              std::string_view shard = {}) noexcept;
  // Node i said yes to an acquisition; `excluded`: it did not count, `why`;
  // `shard` as for answer() (its own state and events, besides the member's).
  void vote(std::size_t i, bool excluded, std::string_view why, std::string_view shard = {});
  // ---- shards of cluster members (shard_telemetry.cpp) ----
  // Before the loop runs: member i is a cluster (its shards are counted).
  void cluster_member(std::size_t i);
  // A connection event of the pool of `address` in member i's router.
  void shard_pool(std::size_t i, const std::string& address, pool_event e, std::string_view detail);
  // What member i's router did (map reads, redirections, failovers).
  void router(std::size_t i, const router_report& r);
  // An event of node i's pool (connections, script loads).
  void pool(std::size_t i, pool_event e, std::string_view detail, clock::time_point sent_at);
  // At shutdown: events from the pools still closing are dropped.
  void close() noexcept { closed_ = true; }

 private:
  struct counts_cell {
    std::atomic<std::uint64_t> ok{0};
    std::array<std::atomic<std::uint64_t>, 16> failed{};
    void add(const result& r) noexcept;
    call_counts read() const noexcept;
  };
  // One master of a cluster member. Cells are only ever appended (a fixed
  // array, `shard_count` published with release after the address is
  // written) and never reused, so snapshot() reads them without a lock; a
  // master that left the map is `active` false and left out of snapshots.
  struct shard_cell {
    std::string address;  // written once, before the cell is published
    std::atomic<bool> active{false};
    std::atomic<bool> connected{false};
    std::atomic<bool> excluded{false};
    std::atomic<std::uint64_t> reconnects{0};
    std::atomic<std::uint64_t> unreachable{0};
    std::array<std::atomic<std::uint64_t>, 8> answers{};
    std::array<std::atomic<std::uint64_t>, latency_histogram::finite_buckets + 1> latency{};
    std::atomic<std::int64_t> latency_sum_us{0};
    // Loop thread only: it was a master once (its events are told from then
    // on), and its first connection was told.
    bool was_master = false;
    bool told_connected = false;
  };
  struct router_cell {
    std::atomic<std::uint64_t> map_reads{0};
    std::atomic<std::uint64_t> map_read_failures{0};
    std::atomic<std::uint64_t> moved{0};
    std::atomic<std::uint64_t> ask{0};
    std::atomic<std::uint64_t> tryagain{0};
    std::atomic<std::uint64_t> clusterdown{0};
    std::atomic<std::uint64_t> failovers{0};
    std::atomic<std::size_t> masters{0};
  };
  struct node_cell {
    std::string address;
    // Cluster members only: their masters (node_stats::max_shards cells).
    std::unique_ptr<shard_cell[]> shards;
    std::atomic<std::size_t> shard_count{0};
    router_cell router;
    std::atomic<bool> connected{false};
    std::atomic<bool> excluded{false};
    std::atomic<std::uint64_t> reconnects{0};
    std::atomic<std::uint64_t> unreachable{0};
    std::array<std::atomic<std::uint64_t>, 8> answers{};
    std::atomic<std::uint64_t> script_loads{0};
    std::atomic<std::uint64_t> script_reloads{0};
    std::array<std::atomic<std::uint64_t>, latency_histogram::finite_buckets + 1> latency{};
    std::atomic<std::int64_t> latency_sum_us{0};
    // Loop thread only.
    std::deque<clock::time_point> recent_reconnects;
    // Scripts (SHA1) this Redsync loaded here, and when: a miss for a
    // command sent before that is the same load (commands in flight
    // together), one sent after it means the node lost the script.
    std::vector<std::pair<std::string, clock::time_point>> loaded;
  };

  void node_changed(std::size_t i, node_state s, std::string_view detail, std::string_view shard = {});
  // Loop thread: member i's cell for master `address`, made (inactive) if
  // absent; null for a standalone member, or when max_shards are taken.
  shard_cell* shard_of(std::size_t i, std::string_view address);
  // Any thread: member i's active shards, for snapshot().
  void read_shards(const node_cell& c, node_stats& n) const;
  void script_missing(std::size_t i, bool function, std::string_view sha1, clock::time_point sent_at);
  bool logging() const noexcept { return static_cast<bool>(log_); }
  void log(log_level level, const std::string& message) noexcept;
  // Runs `call(*observer_)`, catching and counting what it throws.
  template <class F>
  void notify(F&& call) noexcept;

  std::unique_ptr<node_cell[]> nodes_;
  std::size_t size_ = 0;
  counts_cell acquisitions_;
  counts_cell releases_;
  counts_cell extensions_;
  std::atomic<std::uint64_t> lost_{0};
  counts_cell permit_acquisitions_;
  counts_cell permit_releases_;
  counts_cell permit_extensions_;
  std::atomic<std::uint64_t> lost_permits_{0};
  std::atomic<std::uint64_t> observer_errors_{0};
  const std::shared_ptr<observer> observer_;
  const log_hook log_;
  bool closed_ = false;  // loop thread
};

}  // namespace redsync::detail
