// The libuv loop: owned on a background thread, or the application's; post()
// from any thread.

#include "transport/event_loop.hpp"

#include "transport/loop_owner.hpp"
#include "transport/loop_reaper.hpp"
#include "transport/write_list.hpp"
#include "util/cpu_relax.hpp"

#include <uv.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>

// Threading model: `queue_` is the only state shared between threads and is
// guarded by `mutex_` (`may_sleep` is an atomic read by posters); everything
// else is touched on the loop thread only (or before the thread starts /
// after it is joined).
//
// Waking the loop: a post signals the async handle (an eventfd write, then
// an epoll wake-up and an eventfd read on the loop) only when the loop may
// be asleep or about to be. The loop clears `may_sleep` while it works,
// sets it when done (also before uv_run returns) and then looks at the
// queue (its count, `queued`) again. Each side writes its own flag before
// it reads the other's, all sequentially consistent, so either the poster
// signals or the loop's look finds the task: it signals for it then, or,
// right before it polls, runs it at once, without a system call.
//
// Writing: tasks queue commands on connections; the loop's write_list
// writes them all at the end of each batch of tasks, in the same wake-up.
//
// Lifetime of the async handle: it is closed on the loop thread by a task
// queued behind everything posted before destruction began. After that task
// ran, post() drops its function instead of touching the closed handle.
//
// An owned loop destroyed on its own thread (the last reference to a
// Redsync dropped in one of its callbacks) cannot join itself: the thread
// takes over its impl, closes the loop and frees the impl once uv_run
// returns (when the pools have drained), and hands its std::thread to the
// loop_reaper (loop_reaper.hpp), which joins it.

namespace redsync::detail {

namespace {

void close_if_open(uv_handle_t* h, void*) {
  if (uv_is_closing(h) == 0) uv_close(h, nullptr);
}

}  // namespace

struct event_loop::impl {
  uv_loop_t own{};
  uv_loop_t* loop = nullptr;
  bool owned = false;
  uv_async_t async{};
  // Learns which thread runs an external loop (we are not told); unref'd so
  // it never keeps the loop alive.
  uv_prepare_t prepare{};
  // Runs tasks posted on the loop thread itself (a callback that starts the
  // next operation): started instead of the async handle, it keeps the loop
  // from sleeping and runs them on its next turn, without an eventfd.
  uv_idle_t drain{};
  // The loop's connections with commands to write (write_list.hpp).
  std::shared_ptr<write_list> writes;
  // Owned loop: who runs it, the thread or a borrowing caller (loop_owner.hpp).
  std::unique_ptr<loop_owner> owner;
  std::thread thread;
  std::atomic<std::thread::id> loop_thread{};

  std::mutex mutex;
  std::vector<std::function<void()>> queue;  // guarded by mutex
  bool async_closed = false;                 // guarded by mutex
  // False while the loop thread is known to be working: it will look at the
  // queue before it next polls, so a post need not wake it.
  std::atomic<bool> may_sleep{true};
  // Tasks in `queue` (written under mutex): lets the loop's last look skip
  // the mutex when nothing was posted, so it never makes a poster wait.
  std::atomic<std::size_t> queued{0};
  // Destroyed on the loop thread: set there, read there by on_async.
  bool closing_on_loop = false;

  // Owned loop destroyed on its own thread: the thread owns this impl from
  // then on (loop thread only).
  bool self_owned = false;
  // Set once a self-owned thread has freed the impl (read by the reaper).
  std::shared_ptr<std::atomic<bool>> finished = std::make_shared<std::atomic<bool>>(false);

  // External loop only: set by the close callbacks of async, prepare, drain.
  int handles_open = 0;
  std::mutex closed_mutex;
  std::condition_variable closed_cv;
  bool handles_closed = false;

  static void on_async(uv_async_t* handle) {
    auto* self = static_cast<impl*>(handle->data);
    self->loop_thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
    self->run_queued();
  }

  // Runs the tasks queued (one batch: what they post waits for the next
  // turn of the loop, so a chain of tasks posting tasks starves no timer or
  // socket), unless the handles are closing.
  void run_queued() {
    std::vector<std::function<void()>> batch;
    {
      // The poster that counted a task may still hold the mutex (it signals
      // under it): wait for it without a futex round trip of our own, since
      // it is about to let go.
      std::unique_lock lock(mutex, std::try_to_lock);
      for (int spins = 0; !lock.owns_lock() && spins < 256; ++spins) {
        cpu_relax();
        lock.try_lock();
      }
      if (!lock.owns_lock()) lock.lock();
      if (queue.empty() || async_closed || closing_on_loop) return;
      may_sleep.store(false, std::memory_order_relaxed);
      batch.swap(queue);
      queued.store(0, std::memory_order_relaxed);
    }
    run_batch(batch);
    // Done: may_sleep set before this callback (and uv_run) returns, and the
    // tasks posted meanwhile, unsignalled, signalled now. As in post().
    may_sleep.store(true, std::memory_order_seq_cst);
    if (queued.load(std::memory_order_seq_cst) == 0) return;
    std::lock_guard lock(mutex);
    // Tasks posted on the loop thread started `drain`, which keeps the loop
    // from sleeping (uv_backend_timeout() is 0) and runs them next turn.
    if (!queue.empty() && !async_closed && uv_is_active(reinterpret_cast<uv_handle_t*>(&drain)) == 0)
      uv_async_send(&async);
  }

  // Runs one batch of tasks, then writes what they queued. Tasks posted
  // while a batch runs go to a later batch, so post() never runs its
  // function inline.
  void run_batch(std::vector<std::function<void()>>& batch) {
    impl* self = this;
    for (auto& fn : batch) {
      // A task of this batch destroyed the loop's owner (the engine, on the
      // loop thread): the rest were posted for it and would reach into it.
      // They are dropped, as anything posted later is.
      if (self->closing_on_loop) return;
      try {
        fn();
      } catch (...) {
        // Nothing may unwind through libuv; a throwing task is a bug in the
        // caller (run_sync forwards its own exceptions, so never gets here).
        std::fputs("redsync: a task posted to the event loop threw\n", stderr);
        std::terminate();
      }
    }
    writes->write_all();
  }

  static void on_drain(uv_idle_t* handle) {
    uv_idle_stop(handle);
    static_cast<impl*>(handle->data)->run_queued();
  }

  // Right before the loop polls (and may sleep): the last look at the queue.
  static void on_prepare(uv_prepare_t* handle) {
    auto* self = static_cast<impl*>(handle->data);
    self->loop_thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
    self->writes->write_all();  // commands queued by callbacks other than tasks
    // Sequentially consistent, as the poster's two accesses in post():
    // either this load sees its task counted, or its load of may_sleep
    // sees this store and it signals.
    self->may_sleep.store(true, std::memory_order_seq_cst);
    if (self->queued.load(std::memory_order_seq_cst) != 0) self->run_queued();
  }

  // Self-owned: the pools have drained and uv_run returned. Closes what is
  // left (nothing, unless something leaked) and the loop, then frees this.
  void finish_on_own_thread() {
    uv_walk(loop, &close_if_open, nullptr);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    auto done = finished;
    delete this;
    done->store(true, std::memory_order_release);
  }

  void close_own_handles(uv_close_cb cb) {
    {
      std::lock_guard lock(mutex);
      async_closed = true;
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&async), cb);
    uv_close(reinterpret_cast<uv_handle_t*>(&prepare), cb);
    uv_close(reinterpret_cast<uv_handle_t*>(&drain), cb);
  }

  static void on_external_handle_closed(uv_handle_t* handle) {
    auto* self = static_cast<impl*>(handle->data);
    if (--self->handles_open > 0) return;
    std::lock_guard lock(self->closed_mutex);
    self->handles_closed = true;
    self->closed_cv.notify_all();
  }
};

event_loop::event_loop(uv_loop_s* external, bool lend_to_callers) : impl_(std::make_unique<impl>()) {
  impl& s = *impl_;
  s.owned = external == nullptr;
  if (s.owned) {
    loop_reaper::reap_finished();
    if (int rc = uv_loop_init(&s.own); rc != 0) {
      throw std::runtime_error(std::string("uv_loop_init: ") + uv_strerror(rc));
    }
    s.loop = &s.own;
  } else {
    s.loop = external;
  }
  s.writes = write_list::create(s.loop);
  uv_async_init(s.loop, &s.async, &impl::on_async);
  s.async.data = &s;
  uv_prepare_init(s.loop, &s.prepare);
  s.prepare.data = &s;
  uv_prepare_start(&s.prepare, &impl::on_prepare);
  uv_unref(reinterpret_cast<uv_handle_t*>(&s.prepare));
  uv_idle_init(s.loop, &s.drain);
  s.drain.data = &s;
  uv_unref(reinterpret_cast<uv_handle_t*>(&s.drain));
  s.handles_open = 3;
  if (!s.owned) return;
  if (lend_to_callers)
    s.owner = std::make_unique<loop_owner>(s.loop, s.loop_thread, [&s] { impl::on_prepare(&s.prepare); });
  s.thread = std::thread([&s] {
    // The loop thread takes no process signals: they belong to the
    // application's threads, and a write to a peer that closed the
    // connection must fail with EPIPE rather than raise SIGPIPE.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    if (s.owner) {
      s.owner->run_background();
    } else {
      s.loop_thread.store(std::this_thread::get_id());
      uv_run(s.loop, UV_RUN_DEFAULT);
    }
    // Set on this thread, by a destructor that ran inside uv_run.
    if (s.self_owned) s.finish_on_own_thread();
  });
}

event_loop::~event_loop() {
  impl& s = *impl_;
  if (on_loop_thread()) {
    if (s.owned) {
      // Called from inside uv_run on the loop thread: close our handles; the
      // pools' handles close as they drain, then uv_run returns and the
      // thread frees the impl (finish_on_own_thread). Nothing here waits.
      impl* self = impl_.release();
      self->self_owned = true;
      self->closing_on_loop = true;
      self->close_own_handles(nullptr);
      loop_reaper::adopt(std::move(self->thread), self->finished);
      return;
    }
    // External loop, on its thread: close now; the close callbacks run on a
    // later iteration of the application's loop, so the impl must outlive
    // this object and is freed by the last of them.
    impl* leaked = impl_.release();
    leaked->closing_on_loop = true;
    leaked->async.data = leaked;
    {
      std::lock_guard lock(leaked->mutex);
      leaked->async_closed = true;
    }
    auto free_last = [](uv_handle_t* h) {
      auto* self = static_cast<impl*>(h->data);
      if (--self->handles_open == 0) delete self;
    };
    uv_close(reinterpret_cast<uv_handle_t*>(&leaked->async), free_last);
    uv_close(reinterpret_cast<uv_handle_t*>(&leaked->prepare), free_last);
    uv_close(reinterpret_cast<uv_handle_t*>(&leaked->drain), free_last);
    return;
  }
  if (s.owned) {
    loop_reaper::reap_finished();
    post([&s] {
      s.close_own_handles(nullptr);
      // The engine closes its pools before destroying the loop; anything
      // still open here is a leak. Close it so the loop can end: its owner
      // is gone, so nobody else ever will.
      uv_walk(s.loop, &close_if_open, nullptr);
    });
    s.thread.join();
    // uv_run only returns once every handle is closed and every request has
    // completed, so the loop closes cleanly.
    if (uv_loop_close(s.loop) != 0) {
      uv_run(s.loop, UV_RUN_DEFAULT);
      uv_loop_close(s.loop);
    }
    return;
  }
  // External loop, from another thread: the application must keep running
  // its loop until this returns.
  post([&s] { s.close_own_handles(&impl::on_external_handle_closed); });
  std::unique_lock lock(s.closed_mutex);
  s.closed_cv.wait(lock, [&s] { return s.handles_closed; });
}

uv_loop_s* event_loop::loop() const noexcept {
  return impl_->loop;
}

void event_loop::post(std::function<void()> fn) {
  impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    if (s.async_closed) return;  // destruction began: nobody will run it
    s.queue.push_back(std::move(fn));
    s.queued.store(s.queue.size(), std::memory_order_seq_cst);
    if (on_loop_thread()) {
      // Not closed yet (async_closed is set before the handles close).
      uv_idle_start(&s.drain, &impl::on_drain);
      return;
    }
    // Signalled under the lock so the handle cannot be closed in between.
    if (s.may_sleep.load(std::memory_order_seq_cst)) uv_async_send(&s.async);
  }
}

bool event_loop::on_loop_thread() const noexcept {
  return impl_->loop_thread.load(std::memory_order_relaxed) == std::this_thread::get_id();
}

event_loop::borrow::borrow(event_loop& l) {
  loop_owner* owner = l.impl_->owner.get();
  if (owner != nullptr && owner->try_borrow()) owner_ = owner;
}

event_loop::borrow::~borrow() {
  if (owner_ != nullptr) owner_->give_back();
}

bool event_loop::borrow::turn() {
  return owner_->turn();
}

void event_loop::run_sync(const std::function<void()>& fn) {
  if (on_loop_thread()) {
    // Waiting here would deadlock; run inline instead.
    fn();
    return;
  }
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  post([&] {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock(m);
    done = true;
    cv.notify_one();
  });
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return done; });
  if (error) std::rethrow_exception(error);
}

}  // namespace redsync::detail
