// A release retried in the background while a node does not answer.

#include "redlock/engine/release_sender.hpp"

#include "transport/loop_timer.hpp"

#include <algorithm>
#include <memory>

// Why retrying is enough, and what bounds the rest.
//
// A release that got no reply may never have been written (backoff, a
// connect that failed, a command that timed out while connecting), so it is
// sent again until some reply comes. Re-sending is harmless: the script only
// deletes keys that still hold our value, and a new acquisition by the same
// mutex stops the retries first (`wanted`), so even a fixed value is never
// deleted from under a later acquisition.
//
// Overtaking. When the pool drops a connection (say the node was frozen past
// the stall limit), our SET may still sit in that socket's buffer on the
// node, and a release sent on a new connection may run before it; the SET
// then re-creates the key. We do not try to prove that the node has run the
// old socket's bytes (on Redis it does: it reads the old socket before it
// even accepts the new connection, so a release answered on the new
// connection ran after the SET; the test relies only on that). What bounds
// the damage in every case is the key's own expiry: the SET carries
// PX = expiry, and nothing extends it once the release was queued (the
// watchdog stops before a release is sent, and extend needs the lock held),
// so a key re-created at time T is gone by T + expiry, exactly as if its
// holder had crashed, which Redlock already tolerates. The same bound is why
// the retries stop at `give_up_at` = first send + expiry + drift: any SET or
// extension the node ran before the first send has expired by then.

namespace redsync::detail {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::microseconds;

class release_sender final : public loop_task, public std::enable_shared_from_this<release_sender> {
 public:
  release_sender(engine& eng, member_slot pool, std::uint64_t route, script_call call, microseconds timeout,
                 clock::time_point give_up_at, std::function<bool()> wanted,
                 std::shared_ptr<const std::function<bool()>> shared_wanted, command_callback first)
      : eng_(eng),
        eng_alive_(eng.alive()),
        pool_(pool),
        route_(route),
        call_(std::move(call)),
        timeout_(timeout),
        give_up_at_(give_up_at),
        wanted_(std::move(wanted)),
        shared_wanted_(std::move(shared_wanted)),
        first_(std::move(first)) {}

  void send() {
    send_script(eng_.script_mode(), pool_, route_, call_, timeout_,
                eng_.track_cleanup(
                    [self = shared_from_this()](command_result&& r) { self->on_result(std::move(r)); }));
  }

  void on_shutdown() override { stop_waiting(); }

 private:
  void on_result(command_result&& r) {
    // TRYAGAIN (a cluster member's slot is migrating and the keys are
    // split) and CLUSTERDOWN (the cluster lost a slot's master, or the
    // router found none for the slot): the release did not run; try again
    // as for no answer.
    const bool not_run =
        r.value.is_error() && (r.value.str.starts_with("TRYAGAIN") || r.value.str.starts_with("CLUSTERDOWN"));
    const bool replied = r.status == transport_status::ok && !not_run;
    if (first_) {
      auto first = std::move(first_);
      first_ = nullptr;
      first(std::move(r));
    }
    // An engine destroyed on its own loop thread is gone while its pools
    // drain: a release that then fails (the drain's bound passed, the
    // connections were closed) must not reach into it, and is not retried.
    if (eng_alive_.expired()) return;
    // Often enough to catch a node that comes back, rarely enough not to
    // spin while a pool fails fast in backoff.
    const auto every = std::clamp(timeout_, microseconds(10'000), microseconds(1'000'000));
    if (replied || eng_.shutting_down() || clock::now() + every >= give_up_at_ || !still_wanted()) return;
    timer_ = loop_timer::create(eng_.loop().loop());
    self_ = shared_from_this();
    eng_.add_task(this);
    timer_->start(every, [this] {
      auto keep = self_;
      stop_waiting();
      if (!eng_.shutting_down() && still_wanted()) send();
    });
  }

  bool still_wanted() const {
    if (shared_wanted_) return !*shared_wanted_ || (*shared_wanted_)();
    return !wanted_ || wanted_();
  }

  void stop_waiting() {
    if (!timer_) return;
    eng_.remove_task(this);
    timer_->close();
    timer_ = nullptr;
    self_ = nullptr;
  }

  engine& eng_;
  const std::weak_ptr<int> eng_alive_;
  member_slot pool_;
  const std::uint64_t route_;
  const script_call call_;
  const microseconds timeout_;
  const clock::time_point give_up_at_;
  std::function<bool()> wanted_;
  const std::shared_ptr<const std::function<bool()>> shared_wanted_;  // instead of wanted_
  command_callback first_;
  loop_timer* timer_ = nullptr;
  std::shared_ptr<release_sender> self_;  // while waiting to send again
};

}  // namespace

void send_release(engine& eng, member_slot pool, std::uint64_t route, const script_call& call,
                  microseconds timeout, clock::time_point give_up_at, std::function<bool()> wanted,
                  command_callback first) {
  std::make_shared<release_sender>(eng, pool, route, call, timeout, give_up_at, std::move(wanted), nullptr,
                                   std::move(first))
      ->send();
}

void send_release(engine& eng, member_slot pool, std::uint64_t route, const script_call& call,
                  microseconds timeout, clock::time_point give_up_at,
                  std::shared_ptr<const std::function<bool()>> wanted, command_callback first) {
  std::make_shared<release_sender>(eng, pool, route, call, timeout, give_up_at, nullptr, std::move(wanted),
                                   std::move(first))
      ->send();
}

}  // namespace redsync::detail
