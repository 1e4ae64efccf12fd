#pragma once

// The operation that acquires a Mutex (make_acquisition, acquisition.hpp):
// the driver of acquisition_steps, whose decisions it carries out. Its
// members are split by job: acquisition.cpp walks the Redlock steps in
// order; attempt_senders.cpp says how one attempt goes on the wire (the
// acquire script per node, its WAIT, per slot group, or the transaction).
// Loop thread only.

#include "redlock/mutex/acquisition_steps.hpp"
#include "redlock/mutex/fencing.hpp"
#include "redlock/mutex/group_votes.hpp"
#include "redlock/mutex/mutex_operation.hpp"
#include "redlock/mutex/mutex_rounds.hpp"
#include "redlock/mutex/waiting_line.hpp"
#include "redlock/scripts/fast_acquire.hpp"
#include "redlock/trust/durable_wait.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace redsync::detail {

class acquisition final : public mutex_operation, public release_listener::waiter {
 public:
  acquisition(std::shared_ptr<mutex_state> st, bool blocking, context ctx, std::string value,
              std::function<void(result)> done, std::thread::id caller);

  void on_release(std::size_t node, std::string_view next_in_line) override;
  void on_subscribed() override;

 private:
  std::shared_ptr<acquisition> self() { return std::static_pointer_cast<acquisition>(shared_from_this()); }

  // ---- acquisition.cpp: the steps, in the order Redlock takes them ----
  void act(const acquisition_step& next);
  void try_before_timer(const acquisition_step& next);
  void start() override;
  void claim_value();
  void prepare_attempt(const acquisition_step& next);
  void on_surveyed();
  void send_attempt(bool first_attempt);
  void on_attempt(tally&& t);
  void count_token_votes();
  void write_back_token();
  void acquired(const acquisition_step& won);
  void undo(const acquisition_step& failed);
  void listen();
  void wait_for_retry(const acquisition_step& next);
  void on_abandon() override;
  void on_finish(errc why) override;
  void on_outcome(const result& r) override;

  // ---- attempt_senders.cpp: one attempt on the wire ----
  round_sender script_sender();
  round_sender fast_sender(round_sender script);
  fallback_wanted answer_awaited();

  const bool blocking_;
  const std::string value_;
  const std::thread::id caller_;  // the thread that started the call
  bool reentry_ = false;          // a reentrant mutex's owner re-entered: nothing sent
  acquisition_steps steps_;
  wire_command fast_wire_;  // the transaction, for a single-name lock
  durable_spec durable_;    // from claim_value(): off unless mutex_options::durable_replicas
  std::uint64_t rounds_reported_ = 0;
  std::optional<waiting_line> line_;  // from claim_value(): the arrival is taken when our turn comes
  std::optional<group_votes> votes_;  // from claim_value()
  token_votes token_votes_;           // the last attempt's, for its write-back
  loop_timer* retry_timer_ = nullptr;
};

}  // namespace redsync::detail
