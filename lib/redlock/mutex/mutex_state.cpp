// A mutex's configuration and shared state, and the dispatch of its
// operations to their kinds (acquisition.cpp, holder_operations.cpp).

#include "redlock/mutex/mutex_state.hpp"

#include "redlock/mutex/acquisition.hpp"
#include "redlock/mutex/holder_operations.hpp"
#include "redlock/quorum.hpp"
#include "util/value_generator.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace redsync::detail {

namespace {

std::shared_ptr<const std::string> held_as_semaphore_words(const std::vector<std::string>& names) {
  return std::make_shared<const std::string>(
      names.size() == 1 ? fmt::format("\"{}\" is held as a semaphore", names.front())
                        : fmt::format("one of \"{}\" is held as a semaphore", fmt::join(names, "\", \"")));
}

cluster_layout layout_on_clusters(const engine& e, const std::vector<std::string>& names, hold_kind k) {
  if (!e.has_cluster_members()) return {};
  return make_cluster_layout(names, k);
}

}  // namespace

mutex_state::mutex_state(engine& e, std::vector<std::string> n, mutex_options o, hold_kind k)
    : eng(e),
      names(std::move(n)),
      name(names.front()),
      kind(k),
      scripts(scripts_for(k)),
      held_as_semaphore(held_as_semaphore_words(names)),
      plain(names, false, k),
      clustered(layout_on_clusters(e, names, k)),
      slots(clustered.slots.empty() ? std::vector<std::uint16_t>{0} : clustered.slots),
      slot(slots.front()),
      keys(plain.keys),
      opts(std::move(o)),
      route(std::hash<std::string_view>{}(name)),
      timeout(command_timeout(opts.expiry, opts.timeout_factor)),
      drift(detail::drift(opts.expiry, opts.drift_factor)),
      expiry_ms(std::to_string(opts.expiry.count())),
      head_refresh(std::chrono::duration_cast<std::chrono::milliseconds>(timeout) +
                   std::chrono::milliseconds{250}),
      line_keys(plain.line_keys),
      lease_keys(plain.lease_keys),
      channels(plain.channels) {
  if (opts.auto_extend) wd = std::make_unique<watchdog>(eng, *this, watch_settings::of(opts, timeout));
}

// A reader's value carries the reader's tag in front (lock_scripts.hpp).
std::string mutex_state::make_value() const {
  if (kind == hold_kind::shared) return reader_value_tag + writer_value();
  return writer_value();
}

std::string mutex_state::writer_value() const {
  if (opts.value) return *opts.value;
  if (opts.value_generator) {
    std::string v = opts.value_generator();
    if (v.empty())
      throw config_error(
          fmt::format("mutex_options.value_generator returned an empty value for lock \"{}\"", name));
    if (v.front() == '\0')
      throw config_error(fmt::format(
          "mutex_options.value_generator returned a value starting with a NUL byte for lock \"{}\" "
          "(such values mark keys reserved for a waiter)",
          name));
    if (v.front() == reader_value_tag)
      throw config_error(fmt::format(
          "mutex_options.value_generator returned a value starting with the byte 0x01 for lock \"{}\" "
          "(such values mark an RWMutex's readers)",
          name));
    return v;
  }
  return random_value();
}

// A re-entry is judged before anything else: while the owner has unlocks
// to make, the acquisition is theirs, lost or not; another thread's lock
// is refused, since starting afresh would let those unlocks release it.
claim_outcome mutex_state::claim(const std::string& v, std::thread::id caller) {
  {
    std::lock_guard lk(mu);
    const bool valid = held && clock::now() < until && !lost.stop_requested();
    if (holds > 0 && caller != std::thread::id{} && owner == caller) {
      if (valid) {
        ++holds;
        return claim_outcome::reentered;
      }
      // The owner learns of it now. Its holds stay owed: until its unlocks
      // (the first releases what may be left) bring them to zero, nobody,
      // the owner included, acquires afresh, so none of those unlocks can
      // release a later acquisition.
      held = false;
      return lost.stop_requested() ? claim_outcome::reentry_lost : claim_outcome::reentry_expired;
    }
    if (valid || holds > 0) return claim_outcome::held;
  }
  if (wd) wd->stop();
  {
    std::lock_guard lk(mu);
    value = v;
    held = false;
    released = false;
    token = fencing_token{};
    lost = std::stop_source{};
  }
  release_call = call(scripts.release, &lock_keys::release_keys, {v, "0"}, true);
  undo_call = {};    // built by the first failed attempt (most acquisitions have none)
  extend_call = {};  // built by the first extension of this acquisition
  return claim_outcome::claimed;
}

const script_call& mutex_state::undo() {
  if (!undo_call) {
    undo_call = call(scripts.release, &lock_keys::release_keys, {value, "1"}, true);
  }
  return undo_call;
}

void mutex_state::mark_acquired(clock::time_point valid_until, fencing_token t, std::thread::id caller) {
  std::lock_guard lk(mu);
  until = valid_until;
  held = true;
  token = t;
  if (opts.reentrant) {
    holds = 1;
    owner = caller;
  }
}

bool mutex_state::has_value(bool for_release) const {
  std::lock_guard lk(mu);
  if (value.empty()) return false;
  return !(for_release && released);
}

std::string mutex_state::value_snapshot() const {
  std::lock_guard lk(mu);
  return value;
}

mutex_state::clock::time_point mutex_state::valid_until() const {
  std::lock_guard lk(mu);
  return until;
}

// Through the queue, so an automatic extension never overlaps a user call.
void mutex_state::extend_automatically() {
  submit(op_kind::auto_extend, origin::async, {}, {}, [self = shared_from_this()](result r) {
    if (self->wd) self->wd->on_extended(r);
  });
}

void mutex_state::mark_lost(const result& why) {
  // The lost token's callbacks may drop the last handle (watchdog.hpp).
  const auto keep_alive = shared_from_this();
  {
    std::lock_guard lk(mu);
    held = false;
  }
  lost.request_stop();
  eng.telemetry().lost(*this, why);
}

void mutex_state::submit(op_kind kind, origin from, const context& ctx, std::string value_for_acquire,
                         std::function<void(result)> done, std::chrono::milliseconds extend_to) {
  const bool unanswered = !done;
  auto self = shared_from_this();
  std::shared_ptr<mutex_operation> op;
  switch (kind) {
    case op_kind::acquire:
    case op_kind::try_acquire:
      // A reentrant mutex's re-entry is by the thread that blocks in the
      // call (this one: submit runs on the caller's thread); any other
      // call passes no thread, which never re-enters.
      op =
          make_acquisition(self, kind == op_kind::acquire, ctx, std::move(value_for_acquire), std::move(done),
                           from == origin::blocking ? std::this_thread::get_id() : std::thread::id{});
      break;
    case op_kind::release: op = make_release(self, ctx, std::move(done), from == origin::destructor); break;
    case op_kind::extend:
    case op_kind::auto_extend:
      op = make_extension(self, kind == op_kind::auto_extend, ctx, std::move(done), extend_to);
      break;
    case op_kind::check: op = make_check(self, ctx, std::move(done)); break;
  }
  if (unanswered)
    op->submit_unanswered();
  else
    op->submit();
}

}  // namespace redsync::detail
