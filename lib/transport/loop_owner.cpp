// Who runs an owned loop: the background thread, or a borrowing caller
// (loop_owner.hpp says how and why).

#include "transport/loop_owner.hpp"

#include "transport/socket_write.hpp"
#include "util/cpu_relax.hpp"

#include <uv.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace redsync::detail {

namespace {

constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
// How long after the last borrow attempt the background thread keeps
// parking instead of sleeping inside uv_run.
constexpr std::chrono::seconds lending_window{1};
// How long a borrower waits for the background thread's short turn
// (about 50 µs of PAUSE) before it posts instead.
constexpr int max_spins = 2000;

// The loop this thread has borrowed, if any (for SIGPIPE shielding).
thread_local loop_owner* lent_to_this_thread = nullptr;

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool watch(int epfd, int op, int fd, std::uint32_t events) noexcept {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  return ::epoll_ctl(epfd, op, fd, &ev) == 0;
}

}  // namespace

loop_owner::loop_owner(uv_loop_s* loop, std::atomic<std::thread::id>& runner, std::function<void()> settle)
    : loop_(loop), runner_(runner), settle_(std::move(settle)), backend_fd_(uv_backend_fd(loop)) {
  park_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (park_fd_ < 0 || timer_fd_ < 0 || backend_fd_ < 0) {
    const int err = errno;
    if (park_fd_ >= 0) ::close(park_fd_);
    if (timer_fd_ >= 0) ::close(timer_fd_);
    throw std::runtime_error(std::string("redsync: the loop's park set: ") + std::strerror(err));
  }
  if (!watch(park_fd_, EPOLL_CTL_ADD, backend_fd_, EPOLLIN) ||
      !watch(park_fd_, EPOLL_CTL_ADD, timer_fd_, EPOLLIN)) {
    const int err = errno;
    ::close(park_fd_);
    ::close(timer_fd_);
    throw std::runtime_error(std::string("redsync: the loop's park set: ") + std::strerror(err));
  }
}

loop_owner::~loop_owner() {
  ::close(park_fd_);
  ::close(timer_fd_);
}

bool loop_owner::lending_wanted() const noexcept {
  if (lending_broken_) return false;
  const auto last = last_borrow_.load(std::memory_order_relaxed);
  return last != 0 && steady_ns() - last < std::chrono::nanoseconds{lending_window}.count();
}

void loop_owner::run_background() {
  std::unique_lock running(running_);
  for (;;) {
    runner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    const bool lend = lending_wanted();
    // Lending: handle what is ready without sleeping, then park below.
    // Otherwise sleep here, as a plain loop thread (a borrower must not
    // wait for that turn).
    if (!lend) background_turn_.store(false, std::memory_order_relaxed);
    uv_run(loop_, lend ? UV_RUN_NOWAIT : UV_RUN_ONCE);
    if (uv_loop_alive(loop_) == 0) break;
    if (!lend) continue;
    // Callbacks after the poll (replies) may have queued commands or tasks.
    settle_();
    const int timeout = uv_backend_timeout(loop_);
    if (timeout == 0) continue;  // more is ready (a posted task, a closing handle)
    planned_wake_ = timeout < 0 ? never : steady_ns() + std::int64_t{timeout} * 1'000'000;
    runner_.store(std::thread::id{}, std::memory_order_relaxed);
    running.unlock();
    background_turn_.store(false, std::memory_order_relaxed);
    park(timeout);
    resume(running);
    // A short turn follows, which a borrower may wait for.
    background_turn_.store(true, std::memory_order_relaxed);
    if (timer_armed_ <= steady_ns()) timer_armed_ = never;  // it rang (or is about to)
  }
  background_turn_.store(false, std::memory_order_relaxed);
  runner_.store(std::thread::id{}, std::memory_order_relaxed);
}

// Woken from the park: takes the loop back. If a borrower runs it, that
// borrower handles whatever woke us (it stops our park set from seeing the
// loop's events as soon as it has the loop), so park again rather than
// wait for the mutex, which would cost its give-back a futex wake. Wait
// for the mutex only when our own planned wake-up is due (the borrower
// runs that timer too, but we must not spin on it), or when parking
// keeps returning at once (the borrower could not mute our park set).
void loop_owner::resume(std::unique_lock<std::mutex>& running) {
  for (int quick = 0; !running.try_lock(); ++quick) {
    const std::int64_t now = steady_ns();
    if (quick == 100 || now >= planned_wake_) return running.lock();
    const std::int64_t left_ms = planned_wake_ == never ? -1 : (planned_wake_ - now + 999'999) / 1'000'000;
    park(left_ms > std::numeric_limits<int>::max() ? -1 : static_cast<int>(left_ms));
  }
}

void loop_owner::park(int timeout_ms) {
  epoll_event ev[2];
  const int n = ::epoll_wait(park_fd_, ev, 2, timeout_ms);
  for (int i = 0; i < n; ++i) {
    if (ev[i].data.fd != timer_fd_) continue;
    std::uint64_t expirations = 0;
    [[maybe_unused]] const auto got = ::read(timer_fd_, &expirations, sizeof expirations);
  }
}

// Wakes the parked thread by `due` (steady ns) at the latest: unless it
// plans to wake by then anyway, or the timer already rings by then.
void loop_owner::wake_by(std::int64_t due) {
  // A timer that rang while a borrower held the loop: resume() parked again
  // without clearing the record, which would make every later due time
  // look covered and leave the parked thread asleep past it.
  if (timer_armed_ <= steady_ns()) timer_armed_ = never;
  if (due >= planned_wake_ || due >= timer_armed_) return;
  itimerspec at{};
  at.it_value.tv_sec = static_cast<time_t>(due / 1'000'000'000);
  at.it_value.tv_nsec = static_cast<long>(due % 1'000'000'000);
  if (at.it_value.tv_sec == 0 && at.it_value.tv_nsec == 0) at.it_value.tv_nsec = 1;  // 0 would disarm
  // Fails only for arguments out of range (EINVAL), which these are not;
  // should it fail anyway, the thread stops parking after its next wake-up.
  if (::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &at, nullptr) == 0) {
    timer_armed_ = due;
  } else {
    lending_broken_ = true;
  }
}

bool loop_owner::try_borrow() {
  last_borrow_.store(steady_ns(), std::memory_order_relaxed);
  if (!running_.try_lock()) {
    // The background thread is handling what woke it, without sleeping (it
    // lends the loop): that takes microseconds, so wait for it rather than
    // post. Anyone else (a thread sleeping inside uv_run, another
    // borrower) may hold the loop for long: post then.
    for (int spins = 0;; ++spins) {
      if (spins == max_spins || !background_turn_.load(std::memory_order_relaxed)) return false;
      cpu_relax();
      if (running_.try_lock()) break;
    }
  }
  if (uv_loop_alive(loop_) == 0) {  // shutting down: the background thread ends it
    running_.unlock();
    return false;
  }
  // The events are ours to handle now; the parked thread sleeps on. (If
  // this fails it wakes on them and waits for the mutex: slower, not wrong.)
  watch(park_fd_, EPOLL_CTL_MOD, backend_fd_, 0);
  runner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  // A callback on a borrower of another Redsync's loop may borrow this one:
  // the outer borrow is shielded again once this one is given back.
  previous_lent_ = lent_to_this_thread;
  lent_to_this_thread = this;
  return true;
}

bool loop_owner::turn() {
  if (queued_writes_pending()) block_sigpipe();
  return uv_run(loop_, UV_RUN_ONCE) != 0;
}

void loop_owner::shield_borrower_from_sigpipe() {
  if (lent_to_this_thread != nullptr) lent_to_this_thread->block_sigpipe();
}

void loop_owner::block_sigpipe() {
  if (sigpipe_ != sigpipe::open) return;
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &saved_mask_);
  sigpipe_ = sigismember(&saved_mask_, SIGPIPE) == 1 ? sigpipe::blocked_before : sigpipe::blocked_here;
}

void loop_owner::give_back() {
  // What the last turn's late callbacks queued is written now: nobody may
  // run the loop for a while.
  settle_();
  lent_to_this_thread = previous_lent_;
  const bool restore = sigpipe_ == sigpipe::blocked_here;
  sigpipe_ = sigpipe::open;
  if (restore) {
    // A write in this turn to a socket its peer closed may have left a
    // SIGPIPE pending on this thread: take it before the mask lets it
    // through. (A thread that blocks SIGPIPE itself keeps its mask and
    // whatever is pending. A SIGPIPE sent to the whole process at that
    // moment is taken too; at its default action it would have ended it.)
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    const timespec now{0, 0};
    while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &saved_mask_, nullptr);
  }
  runner_.store(std::thread::id{}, std::memory_order_relaxed);
  if (!watch(park_fd_, EPOLL_CTL_MOD, backend_fd_, EPOLLIN)) {
    // The parked thread would not see the loop's events: it stops parking
    // for good (it sleeps inside uv_run again) and is woken to learn so.
    lending_broken_ = true;
    wake_by(steady_ns());
  } else {
    // A timer this turn started (a command's deadline, a retry) may be due
    // before the parked thread means to wake.
    const int timeout = uv_backend_timeout(loop_);
    if (timeout >= 0) wake_by(steady_ns() + std::int64_t{timeout} * 1'000'000);
  }
  running_.unlock();
}

}  // namespace redsync::detail
