#pragma once

/// \file
/// What <redsync/asio.hpp> is made of: one of the library's `*_async` calls
/// turned into an Asio asynchronous operation (any completion token, the
/// handler's executor, its cancellation slot). Not API of its own: include
/// <redsync/asio.hpp>.

#include <redsync/context.hpp>
#include <redsync/export.hpp>

// The version first: an older Asio lacks the headers below, and the message
// should say why.
#if defined(REDSYNC_ASIO_USE_BOOST)
#include <boost/asio/version.hpp>
#if BOOST_ASIO_VERSION < 102200
#error "redsync/asio.hpp needs Boost.Asio 1.22 or later (Boost 1.78): per-operation cancellation slots"
#endif
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#else
#include <asio/version.hpp>
#if ASIO_VERSION < 102200
#error "redsync/asio.hpp needs Asio 1.22 or later (Debian: libasio-dev): per-operation cancellation slots"
#endif
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#endif

#include <memory>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

namespace redsync::detail {

#if defined(REDSYNC_ASIO_USE_BOOST)
namespace net = ::boost::asio;
#else
namespace net = ::asio;
#endif

// What a handler's associated executor is when it has none of its own.
// Asio's default there is the system executor (a thread pool of its own),
// which would run the handler on neither the caller's thread nor a thread
// the caller chose: such handlers are refused at compile time instead.
struct no_associated_executor {};
template <class Handler>
inline constexpr bool has_associated_executor =
    !std::is_same_v<net::associated_executor_t<Handler, no_associated_executor>, no_associated_executor>;

// The cancellation types each kind of call honours. An abandoned acquisition
// undoes what it was granted and leaves the object as it was: no side effect
// remains, so even `total` can be honoured. A release or an extension that
// was sent goes on whatever the context says (the keys may be gone or
// extended): only `terminal` and `partial`.
inline constexpr net::cancellation_type acquisition_cancellation =
    net::cancellation_type::terminal | net::cancellation_type::partial | net::cancellation_type::total;
inline constexpr net::cancellation_type holder_cancellation =
    net::cancellation_type::terminal | net::cancellation_type::partial;

// Installed in the handler's cancellation slot: a cancellation of a type the
// call honours stops the call's context, which the library already obeys
// (an acquisition is abandoned and undone, `errc::cancelled`).
struct stop_on_cancellation {
  std::stop_source stop;
  net::cancellation_type honoured;
  void operator()(net::cancellation_type type) {
    if ((type & honoured) != net::cancellation_type::none) stop.request_stop();
  }
};

// The caller's own stop token, forwarded to the call's stop source.
struct forward_stop {
  std::stop_source to;
  void operator()() noexcept { to.request_stop(); }
};

// One call in flight. Shared by the library's callback (a std::function,
// which must be copyable where the handler need not be) and the completion
// posted to the handler's executor; nothing else is allocated per call.
template <class Result, class Handler>
class asio_operation : public std::enable_shared_from_this<asio_operation<Result, Handler>> {
 public:
  using executor_type = net::associated_executor_t<Handler>;
  // The handler's executor, counting this call as outstanding work (so that
  // io_context::run() does not return while the call is in flight).
  using work_executor = std::decay_t<decltype(net::prefer(std::declval<const executor_type&>(),
                                                          net::execution::outstanding_work.tracked))>;
  using slot_type = net::associated_cancellation_slot_t<Handler>;

  explicit asio_operation(Handler handler)
      : work_(net::prefer(net::get_associated_executor(handler), net::execution::outstanding_work.tracked)),
        slot_(net::get_associated_cancellation_slot(handler)),
        handler_(std::move(handler)) {}

  // The context for the library's call: `ctx`, and also stopped by a
  // cancellation on the handler's slot, if it has one (without, `ctx` as is:
  // no stop source, no slot handler).
  context watch_cancellation(const context& ctx, net::cancellation_type honoured) {
    if (!slot_.is_connected()) return ctx;
    std::stop_source stop;
    if (ctx.stop.stop_possible()) forward_.emplace(ctx.stop, forward_stop{stop});
    slot_.template emplace<stop_on_cancellation>(stop_on_cancellation{stop, honoured});
    return context{ctx.deadline, stop.get_token()};
  }

  // On the library's loop thread: the handler runs on its own executor,
  // never here, and never inside the initiating call (always a post).
  // noexcept: nothing may throw across the loop's callbacks, and a post
  // fails only when memory runs out.
  void complete(Result r) noexcept {
    net::post(*work_,
              [self = this->shared_from_this(), r = std::move(r)]() mutable { self->deliver(std::move(r)); });
  }

  // The library's call threw before it started: nothing will complete.
  void abandon() noexcept {
    slot_.clear();
    forward_.reset();
  }

 private:
  // On the handler's executor, where its slot is used: the slot is let go
  // before the handler runs, so a cancellation emitted from now on reaches
  // nothing (the call has finished: the result stands). The handler and the
  // tracked work are destroyed here, moved-from remains included: the last
  // reference to this state may be dropped later on the loop thread, after
  // the executor's context is gone (a moved-from executor_binder still holds
  // a copy of its strand, whose destructor locks the context's service).
  void deliver(Result r) {
    abandon();
    Handler handler(std::move(*handler_));
    handler_.reset();
    const work_executor work(std::move(*work_));
    work_.reset();
    std::move(handler)(std::move(r));
  }

  std::optional<work_executor> work_;
  slot_type slot_;
  std::optional<std::stop_callback<forward_stop>> forward_;
  std::optional<Handler> handler_;
};

// The initiation given to async_initiate: starts the library's call
// `start(ctx, callback)`, which must call the callback once, later, on the
// loop thread (every `*_async` does).
template <class Result>
struct initiate_call {
  template <class Handler, class Start>
  void operator()(Handler&& handler, Start start, const context& ctx, net::cancellation_type honoured) const {
    using handler_type = std::decay_t<Handler>;
    static_assert(
        has_associated_executor<handler_type>,
        "redsync/asio.hpp: this completion handler has no associated executor, so nothing says where "
        "it should run; bind one: asio::bind_executor(executor, handler) (see docs/api.md, "
        "\"Asio completion tokens\")");
    auto op = std::make_shared<asio_operation<Result, handler_type>>(std::forward<Handler>(handler));
    const context call_ctx = op->watch_cancellation(ctx, honoured);
    try {
      start(call_ctx, [op](Result r) { op->complete(std::move(r)); });
    } catch (...) {
      op->abandon();
      throw;
    }
  }
};

template <class Result, class CompletionToken, class Start>
auto async_call(CompletionToken&& token, Start start, const context& ctx, net::cancellation_type honoured) {
  return net::async_initiate<CompletionToken, void(Result)>(initiate_call<Result>{}, token, std::move(start),
                                                            ctx, honoured);
}

}  // namespace redsync::detail
