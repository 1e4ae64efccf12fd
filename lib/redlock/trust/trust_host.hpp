// What node trust asks of the engine that owns it: the members and where a
// call goes on them, the loop, what the handshakes said, and the telemetry.
// The engine (engine/engine.hpp) implements it; node trust sits below the
// engine and knows it only through this (the engine keeps one trust per
// slot, and each trust sends its looks and repairs through the engine's
// pools).
#pragma once

#include "redlock/telemetry.hpp"
#include "redlock/trust/node_identity.hpp"
#include "transport/event_loop.hpp"
#include "transport/member.hpp"

#include <redsync/options.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace redsync::detail {

class trust_host {
 public:
  virtual event_loop& loop() noexcept = 0;
  virtual std::size_t size() const noexcept = 0;
  virtual std::size_t quorum() const noexcept = 0;
  virtual redsync::script_mode script_mode() const noexcept = 0;
  virtual const std::string& uri(std::size_t i) const noexcept = 0;
  virtual bool is_cluster_member(std::size_t i) const noexcept = 0;
  virtual bool shutting_down() const noexcept = 0;
  virtual bool can_send() const noexcept = 0;
  virtual member& node(std::size_t i) noexcept = 0;
  virtual member_slot at(std::size_t i, std::uint16_t slot) noexcept = 0;
  virtual std::chrono::milliseconds longest_expiry() const noexcept = 0;
  virtual server_identity cluster_identity(std::size_t i, const std::string& address) const = 0;
  virtual void read_identity(std::size_t i, const std::string& address) = 0;
  virtual detail::telemetry& telemetry() noexcept = 0;

 protected:
  ~trust_host() = default;
};

}  // namespace redsync::detail
