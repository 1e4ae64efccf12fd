#include "resources.hpp"

#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string_view>

namespace redsync::soak {

fd_counts open_fds() {
  fd_counts out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr && errno == EMFILE) {
    // Not one fd left to list them with: every fd below the limit is open.
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    out.total = static_cast<int>(limit.rlim_cur);
    out.sockets = -1;
    return out;
  }
  if (dir == nullptr) throw std::runtime_error(std::string("opendir /proc/self/fd: ") + std::strerror(errno));
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == own) continue;
    ++out.total;
    char target[64] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n > 0 && std::string_view(target, static_cast<std::size_t>(n)).starts_with("socket:")) ++out.sockets;
  }
  ::closedir(dir);
  return out;
}

std::size_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t size = 0;
  std::size_t resident = 0;
  if (!(statm >> size >> resident)) throw std::runtime_error("cannot read /proc/self/statm");
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

std::size_t heap_in_use() {
  const struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
}

loop_thread::loop_thread() {
  if (int rc = uv_loop_init(&loop_); rc != 0) {
    throw std::runtime_error(std::string("uv_loop_init: ") + uv_strerror(rc));
  }
  uv_async_init(&loop_, &walk_, &loop_thread::on_walk);
  walk_.data = this;
  // Keeps the loop running until stop(), and then closes both handles.
  uv_async_init(&loop_, &stop_, &loop_thread::on_stop);
  stop_.data = this;
}

void loop_thread::start() {
  thread_ = std::thread([this] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    std::lock_guard lock(mutex_);
    ended_ = true;
    cv_.notify_all();
  });
}

loop_thread::~loop_thread() {
  std::string why;
  if (!stopped_ && !stop(std::chrono::seconds(10), why)) std::fprintf(stderr, "soak: %s\n", why.c_str());
  if (thread_.joinable()) {
    // The loop thread still runs on our members: there is no way to unwind.
    std::fputs("soak: the libuv loop thread cannot be joined; exiting\n", stderr);
    std::fflush(stderr);
    std::_Exit(2);
  }
}

void loop_thread::on_walk(uv_async_t* async) {
  auto* self = static_cast<loop_thread*>(async->data);
  handle_counts counts;
  uv_walk(
      async->loop,
      [](uv_handle_t* h, void* arg) {
        auto& c = *static_cast<handle_counts*>(arg);
        ++c.total;
        ++c.by_type[uv_handle_type_name(uv_handle_get_type(h))];
        if (uv_handle_get_type(h) == UV_TCP && uv_is_closing(h) == 0) ++c.connections;
      },
      &counts);
  std::lock_guard lock(self->mutex_);
  // uv_async_send coalesces: one walk answers every request made before it.
  self->walked_ = std::move(counts);
  self->walks_done_ = self->walks_asked_;
  self->cv_.notify_all();
}

void loop_thread::on_stop(uv_async_t* async) {
  auto* self = static_cast<loop_thread*>(async->data);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->walk_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->stop_), nullptr);
}

std::optional<handle_counts> loop_thread::count_handles(std::chrono::milliseconds bound) {
  std::lock_guard one_at_a_time(walk_call_);
  std::unique_lock lock(mutex_);
  const std::uint64_t ticket = ++walks_asked_;
  uv_async_send(&walk_);
  if (!cv_.wait_for(lock, bound, [&] { return walks_done_ >= ticket; })) return std::nullopt;
  return walked_;
}

bool loop_thread::stop(std::chrono::milliseconds bound, std::string& why) {
  stopped_ = true;
  if (!thread_.joinable()) start();  // never started: run it to close our handles
  uv_async_send(&stop_);
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, bound, [&] { return ended_; })) {
    why = "the libuv loop did not end within " + std::to_string(bound.count()) +
          " ms of closing the soak's own handles: something left an active handle on it";
    return false;
  }
  lock.unlock();
  thread_.join();
  if (int rc = uv_loop_close(&loop_); rc != 0) {
    why = std::string("uv_loop_close: ") + uv_strerror(rc) + " (a handle or request is still open)";
    return false;
  }
  return true;
}

}  // namespace redsync::soak
