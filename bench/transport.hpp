#pragma once

// The library's own transport (event_loop + one node_pool per node), used
// directly: for the floor measurement and for admin commands (INFO, CONFIG
// RESETSTAT) that must not go through a Mutex.

#include "transport/event_loop.hpp"
#include "transport/member.hpp"
#include "transport/node_pool.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

namespace rd = redsync::detail;

class transport {
 public:
  // One pool of one connection per node URI, on a loop thread of its own;
  // a redis+cluster:// URI is a cluster member (a router, one pool per master).
  explicit transport(const std::vector<std::string>& uris);
  // Closes every pool on the loop, then stops the loop.
  ~transport();
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  std::size_t size() const noexcept { return members_.size(); }
  rd::event_loop& loop() noexcept { return loop_; }
  // Loop thread only; standalone members only.
  rd::node_pool& node(std::size_t i) noexcept { return *members_[i]->pool(); }
  // Loop thread only; cluster members only.
  rd::cluster_router& router(std::size_t i) noexcept { return *members_[i]->router(); }
  // Member i as the library's scripts address it (send_script), for keys in
  // `slot` (which a standalone member ignores).
  rd::member_slot member(std::size_t i, std::uint16_t slot = 0) noexcept { return {members_[i].get(), slot}; }

  // Blocking (not on the loop thread): sends argv to standalone node i and waits.
  rd::command_result command(std::size_t i, const std::vector<std::string_view>& argv,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds{2000});
  // A field of `INFO section` on node i ("" when missing or unreachable).
  std::string info_field(std::size_t i, std::string_view section, std::string_view field);

 private:
  rd::event_loop loop_;
  std::vector<std::unique_ptr<rd::member>> members_;
};

}  // namespace bench
