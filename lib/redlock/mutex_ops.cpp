// The Redlock flows of a Mutex, as operations on the loop thread:
// acquire (with retries), release, extend and the ownership check.
//
// Every operation runs alone for its mutex (queued behind the previous one),
// is bounded by its context (deadline timer, stop_token), and ends exactly
// once in finish(). Cleanup never depends on the context: when an attempt
// fails or is abandoned, the release is sent to every node where our SET may
// have been applied before the operation reports.

#include "redlock/mutex_state.hpp"
#include "redlock/quorum.hpp"
#include "redlock/release_sender.hpp"
#include "redlock/round.hpp"
#include "redlock/script_answers.hpp"
#include "transport/loop_timer.hpp"
#include "util/value_generator.hpp"

#include <fmt/format.h>

#include <optional>
#include <stop_token>

namespace redsync::detail {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// Why an acquisition attempt failed. "busy" means the other holders are what
// stood in the way: the nodes that failed or were left out could not have
// made up the quorum on their own.
errc acquire_failure(const tally& t, std::size_t n, std::size_t q) {
  if (t.ok >= q) return errc::validity_elapsed;
  const std::size_t unusable = t.failed + t.excluded + t.pending;
  if (t.taken > 0 && unusable <= n - q) return errc::busy;
  return errc::no_quorum;
}

// Why a holder's step (release, extend, check) failed. We only claim
// "taken" or "expired" when a quorum of nodes told us the state of the key.
errc holder_failure(const tally& t, std::size_t q) {
  if (t.ok + t.taken + t.missing >= q) return t.taken > 0 ? errc::taken : errc::expired;
  return errc::no_quorum;
}

milliseconds default_retry_delay(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(50, 249);  // [50 ms, 250 ms), as redsync
  return milliseconds{d(rng)};
}

// The `send` of a round that runs `call` on every node, on the mutex's route.
std::function<void(node_pool&, command_callback)> script_sender(const script_call& call, std::uint64_t route,
                                                                microseconds timeout) {
  return [call, route, timeout](node_pool& pool, command_callback cb) {
    send_script(pool, route, call, timeout, std::move(cb));
  };
}

class operation final : public loop_task,
                        public release_listener::waiter,
                        public std::enable_shared_from_this<operation> {
 public:
  operation(std::shared_ptr<mutex_state> st, op_kind kind, context ctx, std::string value,
            std::function<void(result)> done)
      : st_(std::move(st)),
        eng_(st_->eng),
        kind_(kind),
        ctx_(std::move(ctx)),
        value_(std::move(value)),
        done_(std::move(done)),
        started_at_(clock::now()) {}

  // Caller's thread: let the caller's stop_token reach the operation (a
  // token already stopped cancels it at once), then hand it to the loop.
  // In that order: once posted, the loop may finish the operation and reset
  // stop_cb_ at any moment, so the caller's thread must be done with it.
  void submit() {
    auto self = shared_from_this();
    if (ctx_.stop.stop_possible()) {
      std::weak_ptr<operation> weak = self;
      event_loop* loop = &eng_.loop();
      stop_cb_.emplace(ctx_.stop, canceller{weak, loop});
    }
    eng_.loop().post([self] { self->enqueue(); });
  }

  // Cleanup still goes out at shutdown (the engine waits for its replies,
  // bounded by shutdown_timeout): an unlock not sent yet is sent now, and
  // abandon() releases an acquisition in flight.
  void on_shutdown() override {
    if (kind_ == op_kind::release && !release_sent_ && !finished_) release_everywhere();
    abandon(errc::shutting_down);
  }

  // The lock was released and we are next in line: try now instead of
  // sleeping out the retry delay.
  void on_release(std::string_view next_in_line) override {
    if (finished_ || next_in_line != value_) return;
    if (in_round_ || waiting_for_survey_ || !retry_timer_) {
      // Our own attempt is in flight and may have raced the release: if it
      // fails, try again at once rather than sleeping through the delay.
      woken_ = true;
      return;
    }
    retry_timer_->stop();
    attempt();
  }

  void on_subscribed() override {
    // Once per wait is enough: every node confirms, but one look closes the
    // gap between our refusal and the subscription.
    if (looked_after_subscribing_) return;
    if (finished_ || in_round_ || waiting_for_survey_ || !retry_timer_ || !first_in_line_) return;
    looked_after_subscribing_ = true;
    retry_timer_->stop();
    attempt();
  }

 private:
  struct canceller {
    std::weak_ptr<operation> op;
    event_loop* loop;
    void operator()() const {
      loop->post([op = op] {
        if (auto o = op.lock()) o->abandon(errc::cancelled);
      });
    }
  };

  void enqueue() {
    if (finished_) return;
    // A release stops the watchdog before it is queued: no automatic
    // extension can run after it and re-create the key.
    if (kind_ == op_kind::release && st_->wd) st_->wd->stop();
    // From here until finish() the operation owns itself: timers and rounds
    // may be the only things pointing at it.
    self_ = shared_from_this();
    eng_.add_task(this);
    registered_ = true;
    if (st_->busy) {
      st_->queue.push_back([self = shared_from_this()] { self->run(); });
      return;
    }
    st_->busy = true;
    run();
  }

  void run() {
    started_ = true;
    if (finished_) {
      // An unlock already answered (cancelled, or out of time, while it
      // waited its turn) still releases: cleanup never depends on the context.
      if (kind_ == op_kind::release && !release_sent_ && eng_.can_send()) release_everywhere();
      return advance_queue();
    }
    // A release still runs while the engine shuts down: a Mutex destroyed
    // just before its Redsync posts one, and the engine waits for it.
    if (kind_ == op_kind::release ? !eng_.can_send() : eng_.shutting_down())
      return finish(errc::shutting_down);
    // Background retries of an earlier release stop before a new acquisition
    // can put the same value (a fixed mutex_options::value) back.
    if (kind_ == op_kind::acquire || kind_ == op_kind::try_acquire) ++st_->generation;
    if (ctx_.deadline != clock::time_point::max()) {
      deadline_timer_ = loop_timer::create(eng_.loop().loop());
      const auto left = duration_cast<microseconds>(ctx_.deadline - clock::now());
      deadline_timer_->start(left, [this] { abandon(errc::deadline_exceeded); });
    }
    switch (kind_) {
      case op_kind::acquire:
      case op_kind::try_acquire: return begin_acquire();
      case op_kind::release: return begin_release();
      case op_kind::extend: return begin_holder_round(op_kind::extend);
      case op_kind::check: return begin_holder_round(op_kind::check);
      case op_kind::auto_extend:
        if (!st_->wd || !st_->wd->active()) return finish(errc::not_held);
        return begin_holder_round(op_kind::extend);
    }
  }

  // ---- acquisition ---------------------------------------------------------

  void begin_acquire() {
    if (ctx_.deadline <= clock::now()) return finish(errc::deadline_exceeded);
    bool holding = false;
    {
      std::lock_guard lk(st_->mu);
      holding = st_->held && clock::now() < st_->until && !st_->lost.stop_requested();
    }
    // Not reentrant: a second acquisition by the same holder would replace
    // the value and strand the keys it holds until they expire.
    if (holding) return finish(errc::already_held);
    if (st_->wd) st_->wd->stop();
    {
      std::lock_guard lk(st_->mu);
      st_->value = value_;
      st_->held = false;
      st_->released = false;
      st_->token = fencing_token{};
      st_->lost = std::stop_source{};
    }
    std::vector<std::string_view> release_keys = st_->keys;
    release_keys.insert(release_keys.end(), st_->line_keys.begin(), st_->line_keys.end());
    std::vector<std::string_view> release_args{value_};
    release_args.insert(release_args.end(), st_->channels.begin(), st_->channels.end());
    st_->release_call = make_script_call(release_script(), release_keys, release_args);
    // A blocking lock waits in the fair line between attempts; try_lock
    // does not queue.
    waits_in_line_ = kind_ == op_kind::acquire;
    arrival_ = std::to_string(
        std::chrono::duration_cast<microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    st_->extend_call = {};  // built by the first extension of this acquisition
    max_tries_ = kind_ == op_kind::try_acquire ? 1 : st_->opts.tries;
    attempt();
  }

  void attempt() {
    ++attempts_;
    // The delay before the next attempt is chosen now, so the lease we take
    // in the waiting line covers it: the lease outlives the gap until our
    // next attempt refreshes it.
    next_delay_ = milliseconds::zero();
    if (attempts_ < max_tries_) {
      next_delay_ =
          st_->opts.retry_delay ? st_->opts.retry_delay(attempts_) : default_retry_delay(eng_.rng());
    }
    const auto lease = 2 * next_delay_ + duration_cast<milliseconds>(st_->timeout) + 1000ms;
    std::vector<std::string_view> keys = st_->keys;
    keys.push_back(record_key);
    keys.insert(keys.end(), st_->line_keys.begin(), st_->line_keys.end());
    keys.insert(keys.end(), st_->lease_keys.begin(), st_->lease_keys.end());
    const std::string lease_ms = std::to_string(lease.count());
    // A head of line is given one command timeout plus the longest default
    // retry delay to take a lock that became free: enough for a live waiter
    // (woken at once, or retrying after a missed wake-up), short next to a
    // lease when it is gone.
    const std::string claim_ms = std::to_string(duration_cast<milliseconds>(st_->timeout).count() + 250);
    st_->acquire_call = make_script_call(acquire_script(), keys,
                                         {value_, st_->expiry_ms, arrival_, lease_ms,
                                          waits_in_line_ && reaches_quorum_ ? "1" : "0", claim_ms});
    // Only once this Redsync has looked at every node's record (the first
    // acquisition waits for that look; later ones go at once).
    waiting_for_survey_ = true;
    eng_.trust().when_surveyed(st_->timeout, [self = shared_from_this()] { self->send_attempt(); });
  }

  void send_attempt() {
    waiting_for_survey_ = false;
    if (finished_) return;
    if (waits_in_line_ && reaches_quorum_) joined_line_ = true;
    attempt_start_ = clock::now();
    in_round_ = true;
    round_spec spec;
    spec.send = script_sender(st_->acquire_call, st_->route, st_->timeout);
    spec.classify = classify_acquire;
    spec.exclude_yes = [e = &eng_](std::size_t i, const reply& r, std::string& why) {
      return e->trust().exclude_yes(i, r, why);
    };
    apply_mutex_options(spec);
    run_round(eng_, std::move(spec),
              [self = shared_from_this()](tally&& t) { self->on_attempt(std::move(t)); });
  }

  void on_attempt(tally&& t) {
    in_round_ = false;
    if (finished_) return;  // abandoned: the release already went out
    last_ = std::move(t);
    first_in_line_ = false;
    std::size_t reached = 0;
    for (std::size_t i = 0; i < last_.nodes.size(); ++i) {
      const auto status = last_.nodes[i].status;
      if (status == node_status::taken && last_.integers[i] == -2) first_in_line_ = true;
      if (status != node_status::timeout && status != node_status::unreachable &&
          status != node_status::not_awaited)
        ++reached;
    }
    // A waiter that cannot reach a quorum cannot use a place in the line,
    // and holding one on the few nodes it reaches would deny the lock to
    // healthy clients: it leaves the lines until an attempt reaches a quorum
    // again (then it rejoins with its first arrival, so keeps its rank).
    const bool reaches = reached >= eng_.quorum();
    if (waits_in_line_ && !reaches && joined_line_) leave_line(false);
    reaches_quorum_ = reaches;
    if (last_.ok < eng_.quorum()) {
      return release_failed_attempt(acquire_failure(last_, eng_.size(), eng_.quorum()));
    }
    // Fencing token. Each node where our SET won answered its counter (one
    // per node, shared by all names) after incrementing it; the token is the
    // maximum T over them. Claim: every later holder of this name gets a
    // token > T, as long as the nodes that lost data since are a minority.
    // Proof without data loss: before we report success, a quorum Q1 of
    // nodes has counter >= T (either they answered T, or the write-back
    // below raised them to T while the key still held our value there). A
    // later holder wins on a quorum Q2 of nodes whose votes count; Q1 and Q2
    // meet in some node x. On x, our SET (and write-back) ran before the
    // later holder's SET NX could succeed, since our key had to be gone
    // first; counters only grow, so its increment on x yields > T, and its
    // token, a maximum that includes x, is > T. With data loss, x may have
    // lost its counter: node_trust.hpp shows that such a node votes again
    // only once repaired to >= T. The common case (a quorum already answered
    // T) needs no second round trip.
    std::int64_t token = 0;
    for (std::size_t i = 0; i < eng_.size(); ++i)
      if (last_.nodes[i].status == node_status::ok) token = std::max<std::int64_t>(token, last_.integers[i]);
    std::size_t at_token = 0;
    std::vector<bool> behind(eng_.size(), true);  // "excluded" = not written back
    for (std::size_t i = 0; i < eng_.size(); ++i) {
      if (last_.nodes[i].status != node_status::ok) continue;
      if (last_.integers[i] == token)
        ++at_token;
      else
        behind[i] = false;
    }
    if (at_token >= eng_.quorum()) return acquired(token);
    write_back_token(token, at_token, std::move(behind));
  }

  void write_back_token(std::int64_t token, std::size_t at_token, std::vector<bool> skip) {
    const std::string token_text = std::to_string(token);
    round_spec spec;
    spec.send = script_sender(make_script_call(fence_script(), {st_->name, record_key}, {value_, token_text}),
                              st_->route, st_->timeout);
    spec.classify = classify_fence;
    spec.quorum = eng_.quorum() - at_token;
    spec.excluded = std::move(skip);
    in_round_ = true;
    run_round(eng_, std::move(spec), [self = shared_from_this(), token, at_token](tally&& wb) {
      self->in_round_ = false;
      if (self->finished_) return;
      if (at_token + wb.ok >= self->eng_.quorum()) return self->acquired(token);
      self->release_failed_attempt(errc::no_quorum);
    });
  }

  void acquired(std::int64_t token) {
    const auto elapsed = duration_cast<microseconds>(clock::now() - attempt_start_);
    if (validity(st_->opts.expiry, elapsed, st_->drift) <= microseconds::zero()) {
      return release_failed_attempt(errc::validity_elapsed);
    }
    {
      std::lock_guard lk(st_->mu);
      st_->until = attempt_start_ + st_->opts.expiry - st_->drift;
      st_->held = true;
      st_->token = fencing_token{static_cast<std::uint64_t>(token)};
    }
    if (st_->wd) st_->wd->start(attempt_start_);
    leave_line(true);
    finish({});
  }

  // Undo a failed attempt. Nodes that answered "taken" did not apply our SET
  // and need nothing. Nodes that said yes (counted or excluded) get a
  // release we wait for (they are responsive, so this costs one round trip). Nodes that timed out,
  // dropped, or were not awaited may still apply the SET later: they get a
  // release too, on the same connection, so the server runs it after the
  // SET; we do not wait for those, a hung node must not stall us. So do
  // nodes that answered an error: a script is not rolled back when it fails
  // part-way (say, the fencing counter holds the wrong type after our SET
  // ran), so the key may be ours there even though the node said no.
  void release_failed_attempt(errc why) {
    failure_ = why;
    std::vector<bool> skip(eng_.size(), true);
    bool any_awaited = false;
    for (std::size_t i = 0; i < eng_.size(); ++i) {
      switch (last_.nodes[i].status) {
        case node_status::ok:
        case node_status::excluded:  // it said yes (and answered); its vote just did not count
          skip[i] = false;
          any_awaited = true;
          break;
        case node_status::timeout:
        case node_status::unreachable:
        case node_status::not_awaited:
        case node_status::reply_error: send_release_unawaited(i); break;
        default: break;
      }
    }
    if (!any_awaited) return after_failed_attempt();
    in_round_ = true;
    round_spec spec = release_spec();
    spec.fail_fast = false;
    spec.excluded = std::move(skip);
    run_round(eng_, std::move(spec), [self = shared_from_this()](tally&&) {
      self->in_round_ = false;
      if (!self->finished_) self->after_failed_attempt();
    });
  }

  void after_failed_attempt() {
    if (attempts_ >= max_tries_) return finish(failure_);
    if (waits_in_line_ && !watching_ && !eng_.shutting_down()) {
      for (const auto& channel : st_->channels) eng_.listener().watch(channel, this);
      watching_ = true;
    }
    if (!retry_timer_) retry_timer_ = loop_timer::create(eng_.loop().loop());
    const auto delay = woken_ ? microseconds::zero() : duration_cast<microseconds>(next_delay_);
    woken_ = false;
    retry_timer_->start(delay, [this] { attempt(); });
  }

  // A waiter that stops waiting (acquired, gave up, cancelled) leaves the
  // line on every node it may be in, so it does not hold up the others until
  // its lease runs out. Not awaited.
  void leave_line(bool acquired) {
    if (!joined_line_ || eng_.shutting_down()) return;
    joined_line_ = false;
    // Where our acquisition won, the acquire script already took us out; any
    // other node may still hold our place from this or an earlier attempt.
    auto needs_leave = [&](std::size_t i) {
      if (!acquired || i >= last_.nodes.size()) return true;
      const auto st = last_.nodes[i].status;
      return st != node_status::ok && st != node_status::excluded;
    };
    std::shared_ptr<script_call> call;  // encoded only if some node needs it (not on the common path)
    for (std::size_t i = 0; i < eng_.size(); ++i) {
      if (!needs_leave(i)) continue;
      if (!call) {
        std::vector<std::string_view> keys(st_->line_keys.begin(), st_->line_keys.end());
        keys.insert(keys.end(), st_->lease_keys.begin(), st_->lease_keys.end());
        call = std::make_shared<script_call>(make_script_call(leave_script(), keys, {value_}));
      }
      send_script(eng_.node(i), st_->route, *call, st_->timeout, [call](command_result&&) {});
    }
  }

  void send_release_unawaited(std::size_t i) {
    send_script(eng_.node(i), st_->route, st_->release_call, st_->timeout, [](command_result&&) {});
  }

  // Sends the release of the current value, retried in the background while
  // a node does not answer (see release_sender.cpp), until the next
  // acquisition starts. Not for the releases between attempts: a retry
  // could land after the next attempt's SET of the same value.
  std::function<void(node_pool&, command_callback)> retried_release_sender() const {
    return [e = &eng_, call = st_->release_call, route = st_->route, timeout = st_->timeout,
            give_up_at = clock::now() + st_->opts.expiry + st_->drift,
            wanted = [st = st_, gen = st_->generation] { return st->generation == gen; }](
               node_pool& pool, command_callback done) {
      send_release(*e, pool, route, call, timeout, give_up_at, wanted, std::move(done));
    };
  }

  void send_release_retried(std::size_t i) {
    retried_release_sender()(eng_.node(i), [](command_result&&) {});
  }

  // The caller lets go: from here held() is false, whatever the release's
  // outcome, so a new lock() acquires afresh. The value is kept (and
  // `released` stays false until a quorum confirmed it), so a repeated
  // unlock still releases it.
  void let_go() {
    release_sent_ = true;
    std::lock_guard lk(st_->mu);
    st_->held = false;
  }

  // An unlock nobody waits for (shutdown, or its caller already answered).
  void release_everywhere() {
    let_go();
    if (!has_value(true)) return;
    for (std::size_t i = 0; i < eng_.size(); ++i) send_release_retried(i);
  }

  // ---- release, extend, check ----------------------------------------------

  round_spec release_spec() {
    round_spec spec;
    spec.send = script_sender(st_->release_call, st_->route, st_->timeout);
    spec.classify = classify_three_way;
    apply_mutex_options(spec);
    return spec;
  }

  // Quorum, fail-fast and node order, as this mutex is configured.
  void apply_mutex_options(round_spec& spec) const {
    spec.quorum = eng_.quorum();
    spec.fail_fast = st_->opts.fail_fast;
    spec.shuffle = st_->opts.shuffle_nodes;
  }

  bool has_value(bool for_release) {
    std::lock_guard lk(st_->mu);
    if (st_->value.empty()) return false;
    return !(for_release && st_->released);
  }

  void begin_release() {
    let_go();
    if (!has_value(true)) return finish(errc::not_held);
    // The release is sent before the context is looked at: cleanup is never
    // skipped because a deadline passed or the caller cancelled.
    in_round_ = true;
    round_spec spec = release_spec();
    spec.send = retried_release_sender();
    run_round(eng_, std::move(spec), [self = shared_from_this()](tally&& t) {
      self->in_round_ = false;
      if (self->finished_) return;
      self->last_ = std::move(t);
      const bool ok = self->last_.ok >= self->eng_.quorum();
      errc why = ok ? errc{} : holder_failure(self->last_, self->eng_.quorum());
      // The keys are released either way; the caller must still learn that
      // the lock had been lost while they thought they held it.
      if (self->st_->lost.stop_requested()) why = errc::lost;
      if (ok || why != errc::no_quorum) {
        // Released, or known to be gone (expired/taken on a quorum): this
        // acquisition is over either way. After no_quorum it may still be
        // on some nodes, so a retried unlock must still be possible.
        std::lock_guard lk(self->st_->mu);
        self->st_->released = true;
      }
      self->finish(why);
    });
  }

  void begin_holder_round(op_kind kind) {
    if (ctx_.deadline <= clock::now()) return finish(errc::deadline_exceeded);
    if (!has_value(false)) return finish(errc::not_held);
    if (kind == op_kind::extend) {
      // Once lost or let go, the acquisition is over: no extension may
      // re-arm its keys. (finish() takes the lock itself.)
      errc refused{};
      {
        std::lock_guard lk(st_->mu);
        if (st_->lost.stop_requested())
          refused = errc::lost;
        else if (st_->released || !st_->held)
          refused = errc::not_held;
      }
      if (refused != errc{}) return finish(refused);
    }
    round_spec spec;
    if (kind == op_kind::extend) {
      if (!st_->extend_call) {
        st_->extend_call =
            make_script_call(extend_script(), st_->keys,
                             {value_snapshot(), st_->expiry_ms, st_->opts.set_nx_on_extend ? "1" : "0"});
      }
      spec.send = script_sender(st_->extend_call, st_->route, st_->timeout);
    } else {
      spec.send = script_sender(make_script_call(check_script(), st_->keys, {value_snapshot()}), st_->route,
                                st_->timeout);
    }
    spec.classify = classify_three_way;
    apply_mutex_options(spec);
    attempts_ = 1;
    attempt_start_ = clock::now();
    in_round_ = true;
    run_round(eng_, std::move(spec), [self = shared_from_this(), kind](tally&& t) {
      self->in_round_ = false;
      if (!self->finished_) self->on_holder_round(kind, std::move(t));
    });
  }

  void on_holder_round(op_kind kind, tally&& t) {
    last_ = std::move(t);
    const auto q = eng_.quorum();
    if (last_.ok < q) return finish(holder_failure(last_, q));
    if (kind == op_kind::extend) {
      const auto elapsed = duration_cast<microseconds>(clock::now() - attempt_start_);
      if (validity(st_->opts.expiry, elapsed, st_->drift) <= microseconds::zero())
        return finish(errc::validity_elapsed);
      bool lost = false;
      {
        std::lock_guard lk(st_->mu);
        lost = st_->lost.stop_requested();
        if (!lost) st_->until = attempt_start_ + st_->opts.expiry - st_->drift;
      }
      // The loss was reported while this extension was in flight (the
      // watchdog does not wait for it past until - margin). The holder has
      // been told to stop, so the keys it just re-armed are released rather
      // than left to block others for another expiry.
      if (lost) {
        for (std::size_t i = 0; i < eng_.size(); ++i) send_release_retried(i);
        return finish(errc::lost);
      }
    }
    finish({});
  }

  std::string value_snapshot() {
    std::lock_guard lk(st_->mu);
    return st_->value;
  }

  // ---- ending ----------------------------------------------------------------

  // Deadline, cancellation or shutdown. If an acquisition round is in flight,
  // our SET may land on any node: release everywhere first.
  void abandon(errc why) {
    if (finished_) return;
    if (in_round_ && (kind_ == op_kind::acquire || kind_ == op_kind::try_acquire)) {
      for (std::size_t i = 0; i < eng_.size(); ++i) send_release_retried(i);
    }
    finish(why);
  }

  void finish(errc why) {
    if (finished_) return;
    finished_ = true;
    const auto keep_alive = std::move(self_);
    if (deadline_timer_) {
      deadline_timer_->close();
      deadline_timer_ = nullptr;
    }
    if (retry_timer_) {
      retry_timer_->close();
      retry_timer_ = nullptr;
    }
    if (registered_) eng_.remove_task(this);
    if (watching_) {
      for (const auto& channel : st_->channels) eng_.listener().unwatch(channel, this);
      watching_ = false;
    }
    if (why != errc{}) leave_line(false);
    result r;
    if (why != errc{}) r.error = make_error_code(why);
    r.nodes = std::move(last_.nodes);
    r.attempts = attempts_;
    r.elapsed = duration_cast<microseconds>(clock::now() - started_at_);
    if (kind_ != op_kind::auto_extend) {
      std::lock_guard lk(st_->mu);
      st_->last = r;
    }
    auto done = std::move(done_);
    // The stop callback may be running on another thread right now; its
    // destructor waits for it, and it only posts, so this cannot deadlock.
    stop_cb_.reset();
    if (done) done(std::move(r));
    if (started_) advance_queue();
  }

  void advance_queue() {
    if (st_->queue.empty()) {
      st_->busy = false;
      return;
    }
    auto next = std::move(st_->queue.front());
    st_->queue.pop_front();
    next();
  }

  std::shared_ptr<mutex_state> st_;
  engine& eng_;
  const op_kind kind_;
  const context ctx_;
  const std::string value_;
  std::function<void(result)> done_;
  const clock::time_point started_at_;

  std::shared_ptr<operation> self_;
  std::optional<std::stop_callback<canceller>> stop_cb_;
  loop_timer* deadline_timer_ = nullptr;
  loop_timer* retry_timer_ = nullptr;
  bool registered_ = false;
  bool release_sent_ = false;
  bool started_ = false;
  bool finished_ = false;
  bool in_round_ = false;
  int attempts_ = 0;
  int max_tries_ = 1;
  milliseconds next_delay_{0};
  bool waits_in_line_ = false;
  bool joined_line_ = false;
  bool watching_ = false;
  bool first_in_line_ = false;
  bool looked_after_subscribing_ = false;
  bool woken_ = false;
  bool waiting_for_survey_ = false;
  bool reaches_quorum_ = true;  // the last attempt reached a quorum of nodes
  std::string arrival_;
  errc failure_ = errc::no_quorum;
  clock::time_point attempt_start_{};
  tally last_;
};

std::vector<std::string> derive(const std::vector<std::string>& names, std::string (*key)(std::string_view)) {
  std::vector<std::string> out;
  out.reserve(names.size());
  for (const auto& n : names) out.push_back(key(n));
  return out;
}

}  // namespace

mutex_state::mutex_state(engine& e, std::vector<std::string> n, mutex_options o)
    : eng(e),
      names(std::move(n)),
      name(names.front()),
      keys(names.begin(), names.end()),
      opts(std::move(o)),
      route(std::hash<std::string_view>{}(name)),
      timeout(command_timeout(opts.expiry, opts.timeout_factor)),
      drift(detail::drift(opts.expiry, opts.drift_factor)),
      expiry_ms(std::to_string(opts.expiry.count())),
      line_keys(derive(names, line_key)),
      lease_keys(derive(names, lease_key)),
      channels(derive(names, release_channel)) {
  if (opts.auto_extend) wd = std::make_unique<watchdog>(*this);
}

std::string mutex_state::make_value() const {
  if (opts.value) return *opts.value;
  if (opts.value_generator) {
    std::string v = opts.value_generator();
    if (v.empty())
      throw config_error(
          fmt::format("mutex_options.value_generator returned an empty value for lock \"{}\"", name));
    return v;
  }
  return random_value();
}

void mutex_state::submit(op_kind kind, const context& ctx, std::string value_for_acquire,
                         std::function<void(result)> done) {
  auto op = std::make_shared<operation>(shared_from_this(), kind, ctx, std::move(value_for_acquire),
                                        std::move(done));
  op->submit();
}

}  // namespace redsync::detail
