#pragma once

// The shared core behind a Redsync: the event loop, one node_pool per node,
// and loop-thread state (the random source). Owned by Redsync; every
// mutex_state points at it and must not outlive it (documented on Redsync).

#include "redlock/telemetry.hpp"
#include "redlock/trust/node_trust.hpp"
#include "redlock/trust/trust_host.hpp"
#include "redlock/wakeup/release_listener.hpp"
#include "transport/cleanup_drain.hpp"
#include "transport/event_loop.hpp"
#include "transport/member.hpp"

#include <redsync/options.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace redsync::detail {

// Work in progress on the loop (an operation with timers) that must be wound
// up before the engine closes its pools: on_shutdown() completes it with
// errc::shutting_down and closes its handles.
struct loop_task {
  virtual ~loop_task() = default;
  virtual void on_shutdown() = 0;
};

// One member of the set: a standalone node (`seeds` empty), or a whole Redis
// Cluster named by its seeds (parse_cluster_uri; `node` unused).
struct member_spec {
  node_options node;
  std::vector<node_options> seeds;
};

// Final: calls through an engine& are direct; only node trust calls
// through trust_host.
class engine final : public trust_host {
 public:
  engine(std::vector<node_options> nodes, const redsync_options& options);
  engine(std::vector<member_spec> members, const redsync_options& options);
  // Winds up the tasks on the loop (releases still due are sent then), waits
  // up to shutdown_timeout for those releases' replies, closes every pool
  // (outstanding commands complete with `shutdown`), then stops the loop.
  // On the loop thread it waits for none of this (see destroy()).
  ~engine();
  // How the Redsync lets go of its engine. Off the loop thread: destroys it
  // (waiting as above). On the loop thread, typically inside one of the
  // engine's own callbacks (an operation's `done` holding the last
  // reference to the Redsync, with more of that operation to run when it
  // returns): new operations end with errc::shutting_down from now on, and
  // the engine is destroyed by a task posted behind everything already
  // posted, so the callback returns into a live engine and operations
  // submitted just before are wound up like the others.
  static void destroy(std::shared_ptr<engine> e);
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  event_loop& loop() noexcept override { return loop_; }
  std::size_t size() const noexcept override { return size_; }
  std::size_t quorum() const noexcept override { return size_ / 2 + 1; }
  // How scripts are sent (send_script's first argument).
  redsync::script_mode script_mode() const noexcept override { return script_mode_; }
  const std::vector<std::string>& addresses() const noexcept { return addresses_; }
  // How messages name node i by its URI: redis://host:port, rediss://host:port
  // or unix:/path. Built from the parsed options, so it never holds a
  // credential (nothing left to redact) and says which name of a server
  // the node list used.
  const std::string& uri(std::size_t i) const noexcept override { return uris_[i]; }
  // Some member is a whole Redis Cluster (docs/cluster.md).
  bool has_cluster_members() const noexcept { return has_cluster_; }
  // Member i is a whole Redis Cluster. Unlike node(i), also during and after
  // shutdown (a round's late answers are judged then).
  bool is_cluster_member(std::size_t i) const noexcept override { return cluster_members_[i]; }
  bool shutting_down() const noexcept override { return shutting_down_.load(std::memory_order_acquire); }
  // Loop thread: false once the pools were handed over for closing; nothing
  // may be sent after that.
  bool can_send() const noexcept override { return !pools_.empty(); }
  // Loop thread: `done` of a cleanup command (a release), counted so that
  // shutdown waits for it.
  command_callback track_cleanup(command_callback done) { return drain_->track(std::move(done)); }

  // Loop thread only. Member i, and where a call whose keys are in `slot`
  // goes on it (a standalone member ignores the slot).
  member& node(std::size_t i) noexcept override { return *pools_[i]; }
  member_slot at(std::size_t i, std::uint16_t slot) noexcept override { return {pools_[i].get(), slot}; }
  std::mt19937_64& rng() noexcept { return rng_; }
  release_listener& listener() noexcept { return *listener_; }

  // Any thread: records a mutex's expiry (the longest one is the default
  // restart guard window).
  void note_expiry(std::chrono::milliseconds expiry) noexcept;
  std::chrono::milliseconds longest_expiry() const noexcept override {
    return std::chrono::milliseconds{longest_expiry_ms_.load(std::memory_order_relaxed)};
  }
  // Loop thread: which nodes' votes count (restart guard, fencing repair),
  // for names of `slot`: one node_trust for every slot without cluster
  // members, else one per slot in use, each judging (member, slot)
  // (docs/cluster.md).
  node_trust& trust(std::uint16_t slot = 0);
  // Loop thread: what the handshake INFO of master `address` of cluster
  // member i said (node_identity.hpp); empty if none was read.
  server_identity cluster_identity(std::size_t i, const std::string& address) const override;
  // Loop thread: master `address` of cluster member i answered with another
  // server mark than its identity here (server_mark.hpp): reads its INFO
  // again (at most one read in flight per master, at most one a second).
  void read_identity(std::size_t i, const std::string& address) override;
  // Loop thread: why standalone member i never votes when its last
  // handshake INFO showed a Redis Cluster node (cluster_node_problem in
  // node_identity.hpp), else empty.
  const std::string& cluster_node(std::size_t i) const noexcept { return cluster_nodes_[i]; }
  // Counters, observer and log hook (any thread for snapshot(), else loop).
  detail::telemetry& telemetry() noexcept override { return *telemetry_; }
  // Expired once the engine is destroyed (see alive_).
  std::weak_ptr<int> alive() const noexcept { return alive_; }
  const detail::telemetry& telemetry() const noexcept { return *telemetry_; }
  void add_task(loop_task* t) { tasks_.insert(t); }
  void remove_task(loop_task* t) { tasks_.erase(t); }

 private:
  // Loop thread: cluster member i's map shows `new_master` (host:port) as a
  // shard's new master: the slots in use that it serves are looked at now.
  void on_failover_seen(std::size_t i, std::string_view new_master);

  void wind_up_tasks();
  // Loop thread: winds up, then closes the pools once the cleanup drained.
  void shut_down(std::function<void()> closed);

  event_loop loop_;
  std::vector<std::unique_ptr<member>> pools_;
  std::size_t size_ = 0;
  bool has_cluster_ = false;
  std::vector<bool> cluster_members_;  // per member: a Redis Cluster
  // Loop thread: true until shut_down. The INFO listeners given to the
  // pools and routers check it: connections outlive an engine destroyed on
  // its own loop thread (they drain), and their INFO replies must not reach
  // it then.
  std::shared_ptr<bool> info_open_ = std::make_shared<bool>(true);
  std::shared_ptr<cleanup_drain> drain_ = std::make_shared<cleanup_drain>();
  const std::chrono::milliseconds shutdown_timeout_;
  std::unique_ptr<release_listener> listener_;
  std::vector<std::string> addresses_;
  std::vector<std::string> uris_;
  std::mt19937_64 rng_;
  std::unordered_set<loop_task*> tasks_;
  std::atomic<std::int64_t> longest_expiry_ms_{0};
  std::unique_ptr<node_trust> trust_;
  std::map<std::uint16_t, std::unique_ptr<node_trust>> slot_trust_;  // with cluster members
  bool restart_guard_ = true;
  std::chrono::milliseconds restart_guard_window_{0};
  // Per cluster member: each master's identity, by host:port.
  std::vector<std::map<std::string, server_identity>> cluster_ids_;
  // Per member: cluster_node(i).
  std::vector<std::string> cluster_nodes_;
  // Shared with the pools' event listeners, which may outlive the engine.
  std::shared_ptr<detail::telemetry> telemetry_;
  // Expires with the engine. An engine destroyed on an application-owned
  // loop's thread returns before its pools close, so answers to rounds
  // still in flight arrive after it is gone: they check this first.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  std::atomic<bool> shutting_down_{false};
  const redsync::script_mode script_mode_;
};

}  // namespace redsync::detail
