// The public Semaphore and permit: blocking, asynchronous and future forms
// of the operations in lib/redlock/ (semaphore_acquisition.cpp,
// permit_operations.cpp).

#include "redlock/blocking_call.hpp"
#include "redlock/semaphore/permit_operations.hpp"
#include "redlock/semaphore/semaphore_acquisition.hpp"
#include "redlock/semaphore/semaphore_state.hpp"

#include <redsync/semaphore.hpp>

#include <future>
#include <stdexcept>

namespace redsync {

namespace {

// A blocking call on the loop thread would wait for the loop it blocks.
bool on_loop_thread(const detail::semaphore_state& st) {
  return st.eng.loop().on_loop_thread();
}

result would_deadlock() {
  result r;
  r.error = make_error_code(errc::would_deadlock);
  return r;
}

// Runs `submit(done)` and waits for its outcome on the caller's thread. The
// promise is shared with the callback: it may still be inside set_value()
// when the waiting thread wakes up and returns.
template <class T, class Submit>
std::future<T> as_future(Submit submit) {
  auto p = std::make_shared<std::promise<T>>();
  auto f = p->get_future();
  submit([p](T r) { p->set_value(std::move(r)); });
  return f;
}

acquire_result dropped_acquisition() {
  acquire_result r;
  r.outcome.error = make_error_code(errc::shutting_down);
  return r;
}

result dropped_call() {
  result r;
  r.error = make_error_code(errc::shutting_down);
  return r;
}

result not_held() {
  result r;
  r.error = make_error_code(errc::not_held);
  return r;
}

}  // namespace

// ---- permit ----------------------------------------------------------------

permit::permit() noexcept = default;
permit::permit(std::shared_ptr<detail::permit_state> state) noexcept : state_(std::move(state)) {}
permit::permit(permit&&) noexcept = default;

permit& permit::operator=(permit&& other) noexcept {
  if (this != &other) {
    permit old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

permit::~permit() {
  if (!state_) return;
  bool held = false;
  {
    std::lock_guard lk(state_->mu);
    held = state_->held;
  }
  // Do not leave the permit blocking others until it expires, also while
  // the Redsync shuts down (the release's may_start decides).
  if (held) {
    try {
      detail::submit_release(state_, {}, nullptr);
    } catch (...) {
      // Only allocation failure can get here; the permit then expires.
    }
  }
}

const std::string& permit::id() const noexcept {
  static const std::string none;
  return state_ ? state_->id : none;
}
std::uint32_t permit::slot() const noexcept {
  return state_ ? state_->slot : 0;
}
fencing_token permit::token() const noexcept {
  return state_ ? state_->token : fencing_token{};
}
permit::clock::time_point permit::until() const {
  if (!state_) return {};
  std::lock_guard lk(state_->mu);
  return state_->until;
}
bool permit::held() const {
  if (!state_) return false;
  std::lock_guard lk(state_->mu);
  return state_->held && clock::now() < state_->until;
}

bool permit::lost() const {
  return state_ && state_->lost.stop_requested();
}
std::stop_token permit::lost_token() const {
  return state_ ? state_->lost.get_token() : std::stop_token{};
}

result permit::release(const context& ctx) {
  if (!state_) return not_held();
  if (on_loop_thread(*state_->sem)) return would_deadlock();
  return detail::call_blocking<result>(
      state_->sem->eng.loop(), [&](callback done) { release_async(ctx, std::move(done)); }, dropped_call());
}
result permit::extend(const context& ctx) {
  if (!state_) return not_held();
  if (on_loop_thread(*state_->sem)) return would_deadlock();
  return detail::call_blocking<result>(
      state_->sem->eng.loop(), [&](callback done) { extend_async(ctx, std::move(done)); }, dropped_call());
}

void permit::release_async(const context& ctx, callback done) {
  if (!state_) {
    // No loop to answer on: an empty permit has no Redsync (semaphore.hpp).
    if (done) done(not_held());
    return;
  }
  detail::submit_release(state_, ctx, std::move(done));
}
void permit::extend_async(const context& ctx, callback done) {
  if (!state_) {
    if (done) done(not_held());
    return;
  }
  detail::submit_extend(state_, ctx, std::move(done));
}
std::future<result> permit::release_future(const context& ctx) {
  return as_future<result>([&](callback done) { release_async(ctx, std::move(done)); });
}
std::future<result> permit::extend_future(const context& ctx) {
  return as_future<result>([&](callback done) { extend_async(ctx, std::move(done)); });
}

// ---- Semaphore -------------------------------------------------------------

Semaphore::Semaphore(std::shared_ptr<detail::semaphore_state> state) : state_(std::move(state)) {}
Semaphore::Semaphore(Semaphore&&) noexcept = default;
Semaphore& Semaphore::operator=(Semaphore&&) noexcept = default;
Semaphore::~Semaphore() = default;

detail::semaphore_state& Semaphore::state() const {
  if (!state_)
    throw std::logic_error(
        "redsync::Semaphore: called on a moved-from Semaphore (assign it one from Redsync::new_semaphore "
        "first)");
  return *state_;
}

acquire_result Semaphore::acquire(const context& ctx) {
  if (on_loop_thread(state())) return {would_deadlock(), {}};
  return detail::call_blocking<acquire_result>(
      state_->eng.loop(), [&](callback done) { acquire_async(ctx, std::move(done)); }, dropped_acquisition());
}
acquire_result Semaphore::try_acquire(const context& ctx) {
  if (on_loop_thread(state())) return {would_deadlock(), {}};
  return detail::call_blocking<acquire_result>(
      state_->eng.loop(), [&](callback done) { try_acquire_async(ctx, std::move(done)); },
      dropped_acquisition());
}
void Semaphore::acquire_async(const context& ctx, callback done) {
  (void)state();  // throws for a moved-from Semaphore
  detail::submit_acquisition(state_, true, ctx, std::move(done));
}
void Semaphore::try_acquire_async(const context& ctx, callback done) {
  (void)state();
  detail::submit_acquisition(state_, false, ctx, std::move(done));
}
std::future<acquire_result> Semaphore::acquire_future(const context& ctx) {
  return as_future<acquire_result>([&](callback done) { acquire_async(ctx, std::move(done)); });
}
std::future<acquire_result> Semaphore::try_acquire_future(const context& ctx) {
  return as_future<acquire_result>([&](callback done) { try_acquire_async(ctx, std::move(done)); });
}

const std::string& Semaphore::name() const noexcept {
  static const std::string none;
  return state_ ? state_->name : none;
}
int Semaphore::permits() const noexcept {
  return state_ ? state_->permits : 0;
}
std::size_t Semaphore::quorum() const noexcept {
  return state_ ? state_->quorum : 0;
}

}  // namespace redsync
