// count_cycle MODE N PORT... : N sequential lock+unlock cycles, MODE async
// (lock_async/unlock_async on the loop, as the ladder's "async API" rung) or
// raw (the ladder's "+line" rung: encode_fast_acquire + our release script,
// sent raw on the library's transport from its loop thread). Prints counts
// for the measured window (after 50 warm-up cycles) divided by N.
#include "bench.hpp"
#include "redlock/scripts/fast_acquire.hpp"
#include "redlock/scripts/script_call.hpp"
#include "redlock/scripts/scripts.hpp"
#include "transport.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <sys/epoll.h>
#include <uv.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <redsync/redsync.hpp>
static thread_local bool in_hook = false;
extern "C" char __executable_start, etext;
struct site {
  void* a;
  long n;
};
static site sites[4096];
static void note_site() {
  if (in_hook) return;
  in_hook = true;
  void* f[12];
  int k = backtrace(f, 12);
  void* pick = nullptr;
  for (int i = 1; i < k; ++i) {
    auto p = reinterpret_cast<char*>(f[i]);
    if (p >= &__executable_start && p < &etext) {
      if (i == 1) continue;  // our wrapper's caller inside the binary is fine; skip frame 1 only if wrapper
      pick = f[i];
      break;
    }
  }
  if (pick) {
    std::size_t h = (reinterpret_cast<std::size_t>(pick) >> 2) % 4096;
    for (int j = 0; j < 4096; ++j) {
      site& s = sites[(h + j) % 4096];
      if (s.a == pick || !s.a) {
        s.a = pick;
        ++s.n;
        break;
      }
    }
  }
  in_hook = false;
}
#include <valgrind/callgrind.h>

extern "C" void* __libc_malloc(size_t);
extern "C" void* __libc_calloc(size_t, size_t);
extern "C" void* __libc_realloc(void*, size_t);
extern "C" void __libc_free(void*);
static std::atomic<long> n_malloc{0}, n_free{0}, n_timer_start{0}, n_timer_stop{0}, n_epoll{0}, n_idle{0};
static std::atomic<bool> counting{false};
static bool getenv_sites = false;
static bool handle_sites = false;
extern "C" void* malloc(size_t n) {
  if (counting.load(std::memory_order_relaxed)) {
    ++n_malloc;
    if (getenv_sites && !handle_sites) note_site();
  }
  return __libc_malloc(n);
}
extern "C" void* calloc(size_t a, size_t b) {
  if (counting.load(std::memory_order_relaxed)) {
    ++n_malloc;
    if (getenv_sites && !handle_sites) note_site();
  }
  return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, size_t n) {
  if (counting.load(std::memory_order_relaxed)) {
    ++n_malloc;
    if (getenv_sites && !handle_sites) note_site();
  }
  return __libc_realloc(p, n);
}
extern "C" void free(void* p) {
  if (p && counting.load(std::memory_order_relaxed)) ++n_free;
  __libc_free(p);
}
using ts_t = int (*)(uv_timer_t*, uv_timer_cb, uint64_t, uint64_t);
extern "C" int uv_timer_start(uv_timer_t* t, uv_timer_cb cb, uint64_t a, uint64_t b) {
  static ts_t real = reinterpret_cast<ts_t>(dlsym(RTLD_NEXT, "uv_timer_start"));
  if (counting) {
    ++n_timer_start;
    if (handle_sites) note_site();
  }
  return real(t, cb, a, b);
}
using tp_t = int (*)(uv_timer_t*);
extern "C" int uv_timer_stop(uv_timer_t* t) {
  static tp_t real = reinterpret_cast<tp_t>(dlsym(RTLD_NEXT, "uv_timer_stop"));
  if (counting) ++n_timer_stop;
  return real(t);
}
using is_t = int (*)(uv_idle_t*, uv_idle_cb);
extern "C" int uv_idle_start(uv_idle_t* t, uv_idle_cb cb) {
  static is_t real = reinterpret_cast<is_t>(dlsym(RTLD_NEXT, "uv_idle_start"));
  if (counting) {
    ++n_idle;
    if (handle_sites) note_site();
  }
  return real(t, cb);
}
using ep_t = int (*)(int, epoll_event*, int, int);
extern "C" int epoll_wait(int fd, epoll_event* e, int m, int t) {
  static ep_t real = reinterpret_cast<ep_t>(dlsym(RTLD_NEXT, "epoll_wait"));
  if (counting) ++n_epoll;
  return real(fd, e, m, t);
}
using epp_t = int (*)(int, epoll_event*, int, int, const sigset_t*);
extern "C" int epoll_pwait(int fd, epoll_event* e, int m, int t, const sigset_t* s) {
  static epp_t real = reinterpret_cast<epp_t>(dlsym(RTLD_NEXT, "epoll_pwait"));
  if (counting) ++n_epoll;
  return real(fd, e, m, t, s);
}

namespace rd = redsync::detail;
using namespace std::chrono_literals;

struct raw_ctx {
  bench::transport& t;
  rd::wire_command acquire;
  rd::script_call release;
  int total;
  int failures = 0;
  std::promise<void> done;
  void round(bool acq, std::function<void(bool)> k) {
    struct st {
      std::size_t left;
      bool ok;
      std::function<void(bool)> done;
    };
    auto s = std::make_shared<st>(st{t.size(), true, std::move(k)});
    auto on = [s](rd::command_result&& r) {
      s->ok = s->ok && r.status == rd::transport_status::ok && !r.value.is_error();
      if (--s->left == 0) s->done(s->ok);
    };
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (acq)
        t.node(i).send(0, acquire, 2s, on, rd::fast_acquire_replies);
      else
        rd::send_script(redsync::script_mode::eval, t.member(i), 0, release, 2s, on);
    }
  }
  void next(int i) {
    if (i == total) return done.set_value();
    round(true, [this, i](bool a) {
      round(false, [this, i, a](bool r) {
        if (!a || !r) ++failures;
        next(i + 1);
      });
    });
  }
};

struct async_ctx {
  redsync::Mutex& m;
  int total;
  int failures = 0;
  std::promise<void> done;
  void next(int i) {
    if (i == total) return done.set_value();
    m.lock_async({}, [this, i](redsync::result l) {
      m.unlock_async({}, [this, i, ok = l.ok()](redsync::result u) {
        if (!ok || !u) ++failures;
        next(i + 1);
      });
    });
  }
};

int main(int argc, char** argv) {
  const std::string mode = argv[1];
  const int n = std::atoi(argv[2]);
  std::vector<std::string> nodes;
  for (int i = 3; i < argc; ++i) nodes.push_back(std::string("redis://127.0.0.1:") + argv[i]);
  const int warm = 50;
  getenv_sites = std::getenv("SITES") != nullptr;
  handle_sites = std::getenv("HANDLE_SITES") != nullptr;
  if (getenv_sites) {
    void* f[2];
    backtrace(f, 2);
  }
  int failures = 0;
  auto measure = [&](auto&& run_n) {
    run_n(warm);
    n_malloc = n_free = n_timer_start = n_timer_stop = n_epoll = n_idle = 0;
    counting = true;
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
    failures += run_n(n);
    CALLGRIND_DUMP_STATS;
    CALLGRIND_STOP_INSTRUMENTATION;
    counting = false;
  };
  if (mode == "async") {
    redsync::Redsync rs(nodes, bench::bench_redsync_options());
    auto m = rs.new_mutex("count-cycle-lib");
    measure([&](int k) {
      async_ctx c{m, k};
      c.next(0);
      c.done.get_future().wait();
      return c.failures;
    });
  } else {
    bench::transport t(nodes);
    const std::string key = "count-cycle-raw", value = "ladder-value-0123456789abcdef";
    const std::string line = rd::line_key(key), leases = rd::lease_key(key),
                      channel = rd::release_channel(key);
    const std::vector<std::string_view> keys{key, line, leases};
    const auto rel = rd::make_script_call(rd::release_script(), keys, {value, "0", channel});
    const auto acq = rd::encode_fast_acquire(key, value, "8000");
    measure([&](int k) {
      raw_ctx c{t, acq, rel, k};
      t.loop().post([&c] { c.next(0); });
      c.done.get_future().wait();
      return c.failures;
    });
  }
  std::printf(
      "mode=%s n=%d failures=%d per-cycle: malloc+calloc+realloc=%.2f free=%.2f uv_timer_start=%.2f "
      "uv_timer_stop=%.2f uv_idle_start=%.2f epoll_wait=%.2f\n",
      mode.c_str(), n, failures, double(n_malloc) / n, double(n_free) / n, double(n_timer_start) / n,
      double(n_timer_stop) / n, double(n_idle) / n, double(n_epoll) / n);
  if (getenv_sites) {
    FILE* o = std::fopen(std::getenv("SITES"), "w");
    for (auto& s : sites)
      if (s.a)
        std::fprintf(o, "%p %.2f\n", (void*)(reinterpret_cast<char*>(s.a) - 1 - &__executable_start),
                     double(s.n) / n);
    std::fclose(o);
  }
}
