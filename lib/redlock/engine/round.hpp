#pragma once

// One round of a Redlock step: the same command sent to every node at once,
// each answer classified into a node_status, and a single report when the
// outcome is known.

#include "redlock/engine/engine.hpp"
#include "redlock/engine/tally.hpp"

#include <redsync/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace redsync::detail {

// Maps one node's transport outcome to its status. `message` receives the
// server's error text for reply errors.
using classify_fn = node_status (*)(const reply& value);

// Whether a refusal (`taken`) says the name is held as the other kind of
// lock (semaphore_scripts.hpp, rule X).
using other_kind_fn = bool (*)(const reply& value);

struct round_spec {
  // Sends the round's command to node `i` (its pool) and calls `done` once.
  std::function<void(std::size_t i, member_slot pool, command_callback done)> send;
  classify_fn classify = nullptr;
  // An acquisition's: reads a refusal because the name is held as the other
  // kind (counted in tally::other_kind, the node's message set to
  // `other_kind_why`). May be null. The words are made once per lock and
  // shared, not formatted per attempt.
  other_kind_fn other_kind = nullptr;
  std::shared_ptr<const std::string> other_kind_why{};
  // The slot of the call's keys (each member's `send` gets member_slot{member, slot}).
  std::uint16_t slot = 0;
  std::size_t quorum = 0;
  // Report as soon as the quorum is reached or has become impossible.
  bool fail_fast = false;
  // Ask the nodes in a random order.
  bool shuffle = false;
  // Nodes to leave out of the round (reported as `excluded`); may be empty.
  std::vector<bool> excluded;
  // Why, per node left out (its result's message); may be empty or shorter.
  std::vector<std::string> excluded_why;
  // Asked when node i says yes (with its reply, the master of a cluster
  // member that gave it (command_result::served_by), and every node's
  // result so far): true (with a reason) turns that yes into `excluded`,
  // which does not count towards the quorum. May be empty.
  std::function<bool(std::size_t i, const reply& r, std::string_view served_by,
                     const std::vector<node_result>& so_far, std::string& why)>
      exclude_yes;
};

// Starts a round on the loop thread. `done` runs exactly once on the loop
// thread, never inside this call. Answers that arrive after the report are
// dropped (the report shows those nodes as `not_awaited`).
void run_round(engine& eng, round_spec spec, std::function<void(tally&&)> done);

// The server error class of an error reply, from its first word.
server_error classify_server_error(std::string_view message) noexcept;

}  // namespace redsync::detail
