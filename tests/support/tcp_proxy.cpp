// Test support: tcp_proxy's loop thread, listener and control calls. The
// forwarding itself is in proxy_connection.cpp.
//
// Control calls are queued under a mutex, the loop is woken with uv_async and
// the caller waits for the call to have run there, so all proxy state is
// touched by the loop thread only.
#include "tcp_proxy.hpp"

#include <uv.h>

#include <csignal>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "proxy_connection.hpp"

namespace redsync::test {

using detail::proxy_connection;
using detail::proxy_shared;

struct tcp_proxy::impl {
  uv_loop_t loop{};
  uv_tcp_t listener{};
  uv_async_t wake{};
  proxy_shared shared;
  bool refusing = false;
  int port = 0;

  std::mutex tasks_mutex;
  std::vector<std::function<void()>> tasks;
  std::thread thread;

  void set_mode(proxy_shared::mode m) {
    shared.current = m;
    for (proxy_connection* c : shared.connections) c->apply_mode();
  }

  // Loop thread: closes everything, so that uv_run returns.
  void close_all() {
    for (proxy_connection* c : shared.connections) c->close(false);
    uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&wake), nullptr);
  }

  static void on_wake(uv_async_t* handle) {
    auto& self = *static_cast<impl*>(handle->data);
    std::vector<std::function<void()>> due;
    {
      std::lock_guard lock(self.tasks_mutex);
      due.swap(self.tasks);
    }
    for (auto& task : due) task();
  }

  static void on_connection(uv_stream_t* listener, int status) {
    auto& self = *static_cast<impl*>(listener->data);
    if (status < 0) return;
    proxy_connection::accept(listener, self.shared, self.refusing);
  }
};

namespace {

void check_port(int port, int min, const char* what) {
  if (port < min || port > 65535)
    throw std::invalid_argument(std::string("tcp_proxy: ") + what + " " + std::to_string(port) +
                                " is out of range");
}

}  // namespace

tcp_proxy::tcp_proxy(int target_port, int listen_port) : impl_(std::make_unique<impl>()) {
  check_port(target_port, 1, "target port");
  check_port(listen_port, 0, "listen port");
  impl& s = *impl_;
  uv_loop_init(&s.loop);
  s.shared.loop = &s.loop;
  s.shared.target_port = target_port;
  uv_async_init(&s.loop, &s.wake, &impl::on_wake);
  s.wake.data = &s;
  uv_tcp_init(&s.loop, &s.listener);
  s.listener.data = &s;

  sockaddr_in addr{};
  uv_ip4_addr("127.0.0.1", listen_port, &addr);
  int rc = uv_tcp_bind(&s.listener, reinterpret_cast<const sockaddr*>(&addr), 0);
  if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&s.listener), 128, &impl::on_connection);
  sockaddr_storage bound{};
  int len = sizeof bound;
  if (rc == 0) rc = uv_tcp_getsockname(&s.listener, reinterpret_cast<sockaddr*>(&bound), &len);
  if (rc != 0) {
    s.close_all();
    uv_run(&s.loop, UV_RUN_DEFAULT);
    uv_loop_close(&s.loop);
    throw std::runtime_error("tcp_proxy: cannot listen on 127.0.0.1:" + std::to_string(listen_port) + ": " +
                             uv_strerror(rc));
  }
  s.port = ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);

  s.thread = std::thread([&s] {
    // Signals belong to the application's threads; a write to a peer that
    // is gone must fail with EPIPE, not raise SIGPIPE.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    uv_run(&s.loop, UV_RUN_DEFAULT);
  });
}

tcp_proxy::~tcp_proxy() {
  run_on_loop([this] { impl_->close_all(); });
  impl_->thread.join();
  // Every handle was closed and its close callback ran inside uv_run.
  uv_loop_close(&impl_->loop);
}

void tcp_proxy::run_on_loop(const std::function<void()>& fn) const {
  std::promise<void> done;
  auto finished = done.get_future();
  {
    std::lock_guard lock(impl_->tasks_mutex);
    impl_->tasks.emplace_back([&fn, &done] {
      fn();
      done.set_value();
    });
  }
  uv_async_send(&impl_->wake);
  finished.wait();
}

int tcp_proxy::port() const noexcept {
  return impl_->port;
}

void tcp_proxy::normal() {
  run_on_loop([this] { impl_->set_mode(proxy_shared::mode::normal); });
}

void tcp_proxy::delay(std::chrono::milliseconds delay, std::chrono::milliseconds jitter) {
  if (delay.count() < 0 || jitter.count() < 0)
    throw std::invalid_argument("tcp_proxy: delay " + std::to_string(delay.count()) + " ms, jitter " +
                                std::to_string(jitter.count()) + " ms: must not be negative");
  run_on_loop([&] {
    impl_->shared.delay = delay;
    impl_->shared.jitter = jitter;
    impl_->set_mode(proxy_shared::mode::delay);
  });
}

void tcp_proxy::stall() {
  run_on_loop([this] { impl_->set_mode(proxy_shared::mode::stall); });
}

void tcp_proxy::drop_connections() {
  run_on_loop([this] {
    // close() frees nothing before its close callbacks run, so iterating is safe.
    for (proxy_connection* c : impl_->shared.connections) c->close(true);
  });
}

void tcp_proxy::refuse(bool on) {
  run_on_loop([this, on] { impl_->refusing = on; });
}

void tcp_proxy::retarget(int target_port) {
  check_port(target_port, 1, "target port");
  run_on_loop([this, target_port] { impl_->shared.target_port = target_port; });
}

proxy_stats tcp_proxy::stats() const {
  proxy_stats out;
  run_on_loop([&] {
    const auto& shared = impl_->shared;
    out.accepted = shared.accepted;
    out.bytes_up = shared.bytes_up;
    out.bytes_down = shared.bytes_down;
    for (const proxy_connection* c : shared.connections) out.open += c->closing() ? 0 : 1;
  });
  return out;
}

}  // namespace redsync::test
