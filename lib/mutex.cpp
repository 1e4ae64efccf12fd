// The public Mutex: blocking, standard-style, asynchronous and future forms
// of the operations in lib/redlock/ (acquisition.cpp, holder_operations.cpp).

#include "redlock/blocking_call.hpp"
#include "redlock/mutex/mutex_state.hpp"

#include <redsync/mutex.hpp>

#include <fmt/format.h>

#include <chrono>
#include <future>
#include <stdexcept>

namespace redsync {

using detail::op_kind;

namespace {

// Runs an operation and waits for it on the caller's thread. `extend_to`:
// an extension's TTL (zero: the expiry).
result run_blocking(detail::mutex_state& st, op_kind kind, const context& ctx,
                    std::chrono::milliseconds extend_to = {}) {
  if (st.eng.loop().on_loop_thread()) {
    result r;
    r.error = make_error_code(errc::would_deadlock);
    return r;
  }
  std::string value;
  if (kind == op_kind::acquire || kind == op_kind::try_acquire) value = st.make_value();
  result dropped;
  dropped.error = make_error_code(errc::shutting_down);
  return detail::call_blocking<result>(
      st.eng.loop(),
      [&](Mutex::callback done) {
        st.submit(kind, detail::mutex_state::origin::blocking, ctx, std::move(value), std::move(done),
                  extend_to);
      },
      std::move(dropped));
}

void run_async(detail::mutex_state& st, op_kind kind, const context& ctx, Mutex::callback done,
               std::chrono::milliseconds extend_to = {}) {
  std::string value;
  if (kind == op_kind::acquire || kind == op_kind::try_acquire) value = st.make_value();
  st.submit(kind, detail::mutex_state::origin::async, ctx, std::move(value), std::move(done), extend_to);
}

std::future<result> run_future(detail::mutex_state& st, op_kind kind, const context& ctx,
                               std::chrono::milliseconds extend_to = {}) {
  auto p = std::make_shared<std::promise<result>>();
  auto f = p->get_future();
  run_async(
      st, kind, ctx, [p](result r) { p->set_value(std::move(r)); }, extend_to);
  return f;
}

// extend(duration): in (0, expiry], because the nodes' restart guard window
// and the fencing counter's repair delay are at least the longest expiry in
// use (node_trust.hpp), not the longest TTL: a key that outlived them could
// be lost in a restart while a repaired node already votes for another
// holder. With a watchdog, only the expiry: its schedule and its lost alarm
// are planned for keys of that TTL.
std::chrono::milliseconds checked_extension(const detail::mutex_state& st, std::chrono::milliseconds d) {
  if (d.count() <= 0) {
    throw config_error(fmt::format("Mutex::extend({} ms) on lock \"{}\": the duration must be positive",
                                   d.count(), st.name));
  }
  if (d > st.opts.expiry) {
    throw config_error(fmt::format(
        "Mutex::extend({} ms) on lock \"{}\": longer than mutex_options.expiry ({} ms); the nodes' restart "
        "guard covers keys up to the longest expiry in use, so make the mutex with a longer expiry instead",
        d.count(), st.name, st.opts.expiry.count()));
  }
  if (st.opts.auto_extend && d != st.opts.expiry) {
    throw config_error(fmt::format(
        "Mutex::extend({} ms) on lock \"{}\": with mutex_options.auto_extend the watchdog extends by "
        "the expiry ({} ms); an extension by another duration would upset its schedule",
        d.count(), st.name, st.opts.expiry.count()));
  }
  return d;
}

}  // namespace

Mutex::Mutex(std::shared_ptr<detail::mutex_state> state) : state_(std::move(state)) {}

detail::mutex_state& Mutex::state() const {
  if (!state_)
    throw std::logic_error(
        "redsync::Mutex: called on a moved-from Mutex (assign it one from Redsync::new_mutex first)");
  return *state_;
}
Mutex::Mutex(Mutex&&) noexcept = default;
Mutex& Mutex::operator=(Mutex&& other) noexcept {
  if (this != &other) {
    Mutex old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

Mutex::~Mutex() {
  if (!state_) return;
  bool held = false;
  {
    std::lock_guard lk(state_->mu);
    held = state_->held;
  }
  // Do not leave the lock blocking others until it expires: release it in the
  // background (the state lives on inside the operation). Also while the
  // Redsync shuts down: the release may still go out then (its may_start).
  if (held) state_->submit(op_kind::release, detail::mutex_state::origin::destructor, {}, {}, nullptr);
}

result Mutex::lock(const context& ctx) {
  return run_blocking(state(), op_kind::acquire, ctx);
}
result Mutex::try_lock(const context& ctx) {
  return run_blocking(state(), op_kind::try_acquire, ctx);
}
result Mutex::unlock(const context& ctx) {
  return run_blocking(state(), op_kind::release, ctx);
}
result Mutex::extend(const context& ctx) {
  return run_blocking(state(), op_kind::extend, ctx);
}
result Mutex::extend_by(std::chrono::milliseconds duration, const context& ctx) {
  auto& st = state();
  return run_blocking(st, op_kind::extend, ctx, checked_extension(st, duration));
}
result Mutex::valid(const context& ctx) {
  return run_blocking(state(), op_kind::check, ctx);
}

void Mutex::lock() {
  result r = lock(context{});
  if (!r) throw lock_error(std::move(r));
}

bool Mutex::try_lock() {
  return static_cast<bool>(try_lock(context{}));
}

bool Mutex::try_lock_until(clock::time_point t) {
  return static_cast<bool>(lock(context::until(t)));
}

void Mutex::unlock() noexcept {
  if (!state_) return;
  try {
    (void)unlock(context{});
  } catch (...) {
    // Only allocation failure can get here; the outcome stays in last_result.
  }
}

void Mutex::lock_async(const context& ctx, callback done) {
  run_async(state(), op_kind::acquire, ctx, std::move(done));
}
void Mutex::try_lock_async(const context& ctx, callback done) {
  run_async(state(), op_kind::try_acquire, ctx, std::move(done));
}
void Mutex::unlock_async(const context& ctx, callback done) {
  run_async(state(), op_kind::release, ctx, std::move(done));
}
void Mutex::extend_async(const context& ctx, callback done) {
  run_async(state(), op_kind::extend, ctx, std::move(done));
}
void Mutex::extend_by_async(std::chrono::milliseconds duration, const context& ctx, callback done) {
  auto& st = state();
  run_async(st, op_kind::extend, ctx, std::move(done), checked_extension(st, duration));
}
void Mutex::valid_async(const context& ctx, callback done) {
  run_async(state(), op_kind::check, ctx, std::move(done));
}
std::future<result> Mutex::lock_future(const context& ctx) {
  return run_future(state(), op_kind::acquire, ctx);
}
std::future<result> Mutex::try_lock_future(const context& ctx) {
  return run_future(state(), op_kind::try_acquire, ctx);
}
std::future<result> Mutex::unlock_future(const context& ctx) {
  return run_future(state(), op_kind::release, ctx);
}
std::future<result> Mutex::extend_future(const context& ctx) {
  return run_future(state(), op_kind::extend, ctx);
}
std::future<result> Mutex::extend_by_future(std::chrono::milliseconds duration, const context& ctx) {
  auto& st = state();
  return run_future(st, op_kind::extend, ctx, checked_extension(st, duration));
}
std::future<result> Mutex::valid_future(const context& ctx) {
  return run_future(state(), op_kind::check, ctx);
}

const std::string& Mutex::name() const noexcept {
  static const std::string none;
  return state_ ? state_->name : none;
}
const std::vector<std::string>& Mutex::names() const noexcept {
  static const std::vector<std::string> none;
  return state_ ? state_->names : none;
}

std::string Mutex::value() const {
  const auto& st = state();
  std::lock_guard lk(st.mu);
  return st.value;
}

Mutex::clock::time_point Mutex::until() const {
  const auto& st = state();
  std::lock_guard lk(st.mu);
  return st.until;
}

std::chrono::milliseconds Mutex::remaining() const {
  const auto& st = state();
  std::lock_guard lk(st.mu);
  const auto now = clock::now();
  if (!st.held || st.lost.stop_requested() || now >= st.until) return std::chrono::milliseconds::zero();
  return std::chrono::floor<std::chrono::milliseconds>(st.until - now);
}

bool Mutex::held() const {
  const auto& st = state();
  std::lock_guard lk(st.mu);
  return st.held && clock::now() < st.until;
}

result Mutex::last_result() const {
  const auto& st = state();
  std::lock_guard lk(st.mu);
  return st.last;
}

bool Mutex::lost() const {
  const auto& st = state();
  std::lock_guard lk(st.mu);
  return st.lost.stop_requested();
}

std::stop_token Mutex::lost_token() const {
  const auto& st = state();
  std::lock_guard lk(st.mu);
  return st.lost.get_token();
}

fencing_token Mutex::token() const {
  const auto& st = state();
  std::lock_guard lk(st.mu);
  return st.token;
}

}  // namespace redsync
