#pragma once

/// \file
/// `redsync::Redsync`: the factory for mutexes and counting semaphores over
/// N independent Redis masters. Including this header gives the whole
/// public API.

#include <redsync/context.hpp>
#include <redsync/error.hpp>
#include <redsync/export.hpp>
#include <redsync/fencing_token.hpp>
#include <redsync/guard.hpp>
#include <redsync/members.hpp>
#include <redsync/mutex.hpp>
#include <redsync/observer.hpp>
#include <redsync/options.hpp>
#include <redsync/rw_mutex.hpp>
#include <redsync/semaphore.hpp>
#include <redsync/stats.hpp>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace redsync {

namespace detail {
class engine;
}

/// Holds one connection pool per Redis master and the libuv loop that drives
/// them. Thread-safe: share one `Redsync` between threads.
///
/// \code
/// redsync::Redsync rs({"redis://127.0.0.1:7001", "redis://127.0.0.1:7002",
///                      "redis://127.0.0.1:7003"});
/// auto m = rs.new_mutex("orders:42", {.expiry = 10s, .tries = 5});
/// if (auto r = m.lock(redsync::context::timeout(2s)); !r) {
///   std::cerr << r.describe() << "\n";
/// }
/// \endcode
///
/// Must outlive every `Mutex` it made. Destruction first sends the releases
/// still due (of a `Mutex` destroyed while holding, of an acquisition
/// abandoned in flight) and waits for their replies for up to
/// `redsync_options::shutdown_timeout`, then closes all connections; calls
/// still in flight complete with `errc::shutting_down`.
class REDSYNC_API Redsync {
 public:
  /// Nodes as URIs (see `node_options::parse`). Throws `config_error` for zero
  /// nodes, a malformed URI, a bad option, or one server (same `address()`)
  /// listed twice, even with another db: Redlock counts independent masters.
  /// One server under two names (`127.0.0.1` and `localhost`, a host name
  /// and its address) is found once connected, by its run_id: its first
  /// name votes, every later one is `node_status::excluded` in every result,
  /// with a message naming both URIs.
  /// Connections are opened lazily.
  explicit Redsync(const std::vector<std::string>& node_uris, redsync_options options = {});
  /// Nodes as URIs written in place: `Redsync rs({"redis://a:6379",
  /// "redis://b:6379"})`. (Without it, exactly two string literals would be
  /// ambiguous: they also match a vector's iterator-pair constructor.) As
  /// the constructor above.
  explicit Redsync(std::initializer_list<std::string_view> node_uris, redsync_options options = {});
  /// Nodes as option structs.
  explicit Redsync(std::vector<node_options> nodes, redsync_options options = {});
  ~Redsync();
  Redsync(const Redsync&) = delete;
  Redsync& operator=(const Redsync&) = delete;

  /// A mutex for `name`. Throws `config_error` for an empty name or a bad
  /// option (the message names the field and the value).
  Mutex new_mutex(std::string name, mutex_options options = {});
  /// A mutex over several names at once (as node-redlock's multi-resource
  /// locks): on each node all names are taken, extended and released
  /// together by one script call, or none are. The names are sorted, so
  /// `{"a", "b"}` and `{"b", "a"}` are the same lock; a waiter stands in the
  /// waiting line of every name, and a release wakes the waiters of every
  /// name. The fencing token is above every earlier token of each name.
  /// Throws `config_error` for an empty list, an empty or duplicate name, or
  /// a bad option.
  Mutex new_multi_mutex(std::vector<std::string> names, mutex_options options = {});

  /// A read-write lock of `name` (rw_mutex.hpp): its writer and its reader
  /// are mutexes made with `options`. Throws `config_error` as `new_mutex`.
  RWMutex new_rw_mutex(std::string name, mutex_options options = {});

  /// A counting semaphore of `permits` (k) permits over these nodes
  /// (semaphore.hpp). Throws `config_error` for an empty name, permits
  /// outside 1..1024, a bad option, or a `semaphore_options::quorum` below
  /// the safe bound floor(k*N/(k+1)) + 1 or above N (the message names the
  /// value and the bound).
  Semaphore new_semaphore(std::string name, int permits, semaphore_options options = {});

  /// Number of nodes, N.
  std::size_t node_count() const noexcept;
  /// Votes needed: N/2 + 1.
  std::size_t quorum() const noexcept;
  /// Node addresses, in node order.
  std::vector<std::string> addresses() const;

  /// The counters of this `Redsync` (stats.hpp): calls by outcome, lost
  /// locks, and per node its state, answers, script loads and a latency
  /// histogram. Any thread, the loop thread and observer callbacks included;
  /// never blocks (relaxed atomic loads, no lock, no hop to the loop).
  stats_snapshot stats() const;

 private:
  std::shared_ptr<detail::engine> engine_;
};

}  // namespace redsync
