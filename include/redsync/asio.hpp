#pragma once

/// \file
/// Asio completion tokens for `Mutex`, `Semaphore` and `permit`: the
/// library's asynchronous calls with any token (`asio::use_awaitable`,
/// `asio::experimental::deferred` (`asio::deferred` from Asio 1.24),
/// `asio::use_future`, a callback bound to an executor, ...). Standalone
/// Asio 1.22 or later (`#include <asio.hpp>`); define
/// `REDSYNC_ASIO_USE_BOOST` for Boost.Asio (Boost 1.78 or later). Like
/// <redsync/fmt.hpp>, it is not part of <redsync/redsync.hpp>: only code that
/// includes it needs Asio.
///
/// \code
/// #include <redsync/asio.hpp>
/// asio::awaitable<void> work(redsync::Mutex& m) {
///   auto r = co_await redsync::async_lock(m, redsync::context::timeout(5s), asio::use_awaitable);
///   if (!r) co_return;                     // busy, no_quorum, cancelled, ...
///   ...                                    // m.token() for the protected resource
///   co_await redsync::async_unlock(m, {}, asio::use_awaitable);
/// }
/// \endcode
///
/// Every call here (full text: docs/api.md, "Asio completion tokens"):
/// - completes with the library's own outcome, `void(redsync::result)` (an
///   acquisition: `void(redsync::acquire_result)`), so `co_await` yields it
///   and never throws it: busy, no quorum or cancelled are values, as in the
///   rest of the library. It throws what the underlying `*_async` call
///   throws, before anything is sent (a moved-from object, a refused
///   duration).
/// - completes on the completion handler's associated executor (for a
///   coroutine, its executor), by a post: never on the library's loop thread
///   and never inside the initiating call. Until then the operation counts
///   as outstanding work on that executor, so `io_context::run()` does not
///   return while it is in flight. A handler with no associated executor (a
///   plain lambda, `asio::detached`) does not compile: bind one with
///   `asio::bind_executor(ex, handler)`. (`asio::use_future` has one of its
///   own; Asio sets such a future's value from its system thread pool.)
/// - honours the cancellation slot associated with the handler
///   (`asio::bind_cancellation_slot`, a coroutine's cancellation state,
///   `awaitable_operators`): a cancellation requests a stop through the
///   call's context, and the call completes with `errc::cancelled` unless it
///   had already finished (then it completes with what it got, a held lock
///   included, and the cancellation is ignored). Acquisitions honour
///   `terminal`, `partial` and `total`: the library abandons them and undoes
///   what was granted on every node, so no side effect remains. Releases and
///   extensions honour `terminal` and `partial`: they stop waiting, but what
///   was sent goes on (as with a stopped context). The context's own deadline
///   and stop token keep working alongside. The slot is cleared on the
///   handler's executor before the handler runs; emit from that executor.
/// - needs the `Mutex`, `Semaphore` or `permit` to outlive the operation
///   (with `deferred`, until it has run), and the executor's execution
///   context to stay alive until it completes (the completion is posted to
///   it from the loop thread). No thread, and no copy of the object, per
///   call: one small shared block holds the handler between the library's
///   callback and the post.

#include <redsync/mutex.hpp>
#include <redsync/semaphore.hpp>

#include <redsync/asio_completion.hpp>

#include <chrono>
#include <utility>

namespace redsync {

/// `Mutex::lock(ctx)` with an Asio completion token: completes with
/// `void(redsync::result)`. Cancellation: terminal, partial, total.
template <class CompletionToken>
auto async_lock(Mutex& m, const context& ctx, CompletionToken&& token) {
  return detail::async_call<result>(
      std::forward<CompletionToken>(token),
      [&m](const context& c, Mutex::callback done) { m.lock_async(c, std::move(done)); }, ctx,
      detail::acquisition_cancellation);
}

/// `Mutex::try_lock(ctx)` (one attempt) with an Asio completion token:
/// `void(redsync::result)`. Cancellation: terminal, partial, total.
template <class CompletionToken>
auto async_try_lock(Mutex& m, const context& ctx, CompletionToken&& token) {
  return detail::async_call<result>(
      std::forward<CompletionToken>(token),
      [&m](const context& c, Mutex::callback done) { m.try_lock_async(c, std::move(done)); }, ctx,
      detail::acquisition_cancellation);
}

/// `Mutex::unlock(ctx)` with an Asio completion token:
/// `void(redsync::result)`. The release is sent whatever the context or a
/// cancellation says; cancellation (terminal, partial) stops the waiting.
template <class CompletionToken>
auto async_unlock(Mutex& m, const context& ctx, CompletionToken&& token) {
  return detail::async_call<result>(
      std::forward<CompletionToken>(token),
      [&m](const context& c, Mutex::callback done) { m.unlock_async(c, std::move(done)); }, ctx,
      detail::holder_cancellation);
}

/// `Mutex::extend(ctx)` with an Asio completion token:
/// `void(redsync::result)`. Cancellation: terminal, partial.
template <class CompletionToken>
auto async_extend(Mutex& m, const context& ctx, CompletionToken&& token) {
  return detail::async_call<result>(
      std::forward<CompletionToken>(token),
      [&m](const context& c, Mutex::callback done) { m.extend_async(c, std::move(done)); }, ctx,
      detail::holder_cancellation);
}

/// `Mutex::extend(duration, ctx)` with an Asio completion token:
/// `void(redsync::result)`. A refused duration throws `config_error` when
/// the operation is initiated. Cancellation: terminal, partial.
template <class Rep, class Period, class CompletionToken>
auto async_extend(Mutex& m, const std::chrono::duration<Rep, Period>& duration, const context& ctx,
                  CompletionToken&& token) {
  return detail::async_call<result>(
      std::forward<CompletionToken>(token),
      [&m, duration](const context& c, Mutex::callback done) {
        m.extend_async(duration, c, std::move(done));
      },
      ctx, detail::holder_cancellation);
}

/// `Mutex::valid(ctx)` with an Asio completion token:
/// `void(redsync::result)`. Cancellation: terminal, partial, total (it
/// changes nothing).
template <class CompletionToken>
auto async_valid(Mutex& m, const context& ctx, CompletionToken&& token) {
  return detail::async_call<result>(
      std::forward<CompletionToken>(token),
      [&m](const context& c, Mutex::callback done) { m.valid_async(c, std::move(done)); }, ctx,
      detail::acquisition_cancellation);
}

/// `Semaphore::acquire(ctx)` with an Asio completion token: completes with
/// `void(redsync::acquire_result)` (the permit on success). Cancellation:
/// terminal, partial, total.
template <class CompletionToken>
auto async_acquire(Semaphore& s, const context& ctx, CompletionToken&& token) {
  return detail::async_call<acquire_result>(
      std::forward<CompletionToken>(token),
      [&s](const context& c, Semaphore::callback done) { s.acquire_async(c, std::move(done)); }, ctx,
      detail::acquisition_cancellation);
}

/// `Semaphore::try_acquire(ctx)` (one attempt) with an Asio completion
/// token: `void(redsync::acquire_result)`. Cancellation: terminal, partial,
/// total.
template <class CompletionToken>
auto async_try_acquire(Semaphore& s, const context& ctx, CompletionToken&& token) {
  return detail::async_call<acquire_result>(
      std::forward<CompletionToken>(token),
      [&s](const context& c, Semaphore::callback done) { s.try_acquire_async(c, std::move(done)); }, ctx,
      detail::acquisition_cancellation);
}

/// `permit::release(ctx)` with an Asio completion token:
/// `void(redsync::result)`. Sent whatever the context or a cancellation
/// says; cancellation (terminal, partial) stops the waiting. An empty permit
/// completes with `not_held`, still on the handler's executor.
template <class CompletionToken>
auto async_release(permit& p, const context& ctx, CompletionToken&& token) {
  return detail::async_call<result>(
      std::forward<CompletionToken>(token),
      [&p](const context& c, permit::callback done) { p.release_async(c, std::move(done)); }, ctx,
      detail::holder_cancellation);
}

/// `permit::extend(ctx)` with an Asio completion token:
/// `void(redsync::result)`. Cancellation: terminal, partial.
template <class CompletionToken>
auto async_extend(permit& p, const context& ctx, CompletionToken&& token) {
  return detail::async_call<result>(
      std::forward<CompletionToken>(token),
      [&p](const context& c, permit::callback done) { p.extend_async(c, std::move(done)); }, ctx,
      detail::holder_cancellation);
}

}  // namespace redsync
