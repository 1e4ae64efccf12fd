// The read-write lock and the coroutine API (issue 36), next to the plain
// mutex in the same run:
//  - cycles: sequential blocking lock + unlock of a Mutex, of an RWMutex's
//    writer and of its reader (uncontended), and the Mutex's cycle through
//    Asio completion tokens (`co_await async_lock / async_unlock` on one
//    io_context thread) when Asio was found at build time;
//  - mixed: `--rw-threads` threads (default 16), each its own RWMutex of
//    one name, for the window: 9 of 10 acquisitions read, 1 writes, each
//    hold ~1 ms; grants per second by kind, waits, and how many readers
//    held at once. A writer that sees another holder, or a reader that sees
//    a writer, by the holders' own bookkeeping, is counted as an overlap
//    (a sanity check, not the proof: that is the fault suite's).

#include "bench.hpp"

#include <redsync/redsync.hpp>

#ifdef REDSYNC_BENCH_ASIO
#include <redsync/asio.hpp>

#include <asio.hpp>
#endif

#include <atomic>
#include <random>
#include <thread>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;

// `iterations` lock + unlock cycles of `m` after `warmup`, blocking.
json blocking_cycle(redsync::Mutex& m, const config& cfg, int& failures) {
  samples cycle;
  cycle.reserve(static_cast<std::size_t>(cfg.iterations));
  for (int i = 0; i < cfg.warmup + cfg.iterations; ++i) {
    const auto t0 = clock::now();
    const auto l = m.lock(redsync::context{});
    const auto u = m.unlock(redsync::context{});
    if (!l || !u) ++failures;
    if (i >= cfg.warmup) cycle.add(clock::now() - t0);
  }
  return cycle.summary();
}

#ifdef REDSYNC_BENCH_ASIO
// The same cycle as a coroutine on an io_context run by this thread.
json coroutine_cycle(redsync::Mutex& m, const config& cfg, int& failures) {
  samples cycle;
  cycle.reserve(static_cast<std::size_t>(cfg.iterations));
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < cfg.warmup + cfg.iterations; ++i) {
          const auto t0 = clock::now();
          const auto l = co_await redsync::async_lock(m, redsync::context{}, asio::use_awaitable);
          const auto u = co_await redsync::async_unlock(m, redsync::context{}, asio::use_awaitable);
          if (!l || !u) ++failures;
          if (i >= cfg.warmup) cycle.add(clock::now() - t0);
        }
      },
      asio::detached);
  io.run();
  return cycle.summary();
}
#endif

struct mixed_counts {
  std::atomic<int> readers{0};
  std::atomic<int> writers{0};
  std::atomic<int> most_readers{0};
  std::atomic<long> overlaps{0};
  std::atomic<long> failures{0};
};

void note_most(std::atomic<int>& most, int n) {
  int m = most.load();
  while (n > m && !most.compare_exchange_weak(m, n)) {
  }
}

json mixed(redsync::Redsync& rs, const config& cfg) {
  const std::string name = unique_name("rw-mixed");
  mixed_counts counts;
  std::vector<samples> read_waits(static_cast<std::size_t>(cfg.rw_threads));
  std::vector<samples> write_waits(static_cast<std::size_t>(cfg.rw_threads));
  const auto end = clock::now() + cfg.duration;
  std::vector<std::thread> threads;
  for (int t = 0; t < cfg.rw_threads; ++t) {
    threads.emplace_back([&, t] {
      auto rw = rs.new_rw_mutex(name, {.tries = redsync::unlimited_tries});
      std::minstd_rand rng(static_cast<unsigned>(t + 1));
      while (clock::now() < end) {
        const bool writes = rng() % 10 == 0;
        redsync::Mutex& m = writes ? rw.writer() : rw.reader();
        const auto t0 = clock::now();
        const auto l = m.lock(redsync::context::until(end));
        if (!l) {
          if (!l.is(redsync::errc::deadline_exceeded)) ++counts.failures;
          break;
        }
        (writes ? write_waits : read_waits)[static_cast<std::size_t>(t)].add(clock::now() - t0);
        if (writes) {
          if (++counts.writers != 1 || counts.readers.load() != 0) ++counts.overlaps;
        } else {
          note_most(counts.most_readers, ++counts.readers);
          if (counts.writers.load() != 0) ++counts.overlaps;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        --(writes ? counts.writers : counts.readers);
        if (!m.unlock(redsync::context{})) ++counts.failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  samples reads, writes;
  for (const auto& s : read_waits) reads.append(s);
  for (const auto& s : write_waits) writes.append(s);
  const double seconds = std::chrono::duration<double>(cfg.duration).count();
  json j;
  j.integer("threads", cfg.rw_threads)
      .integer("window_ms", cfg.duration.count())
      .num("reads_per_s", static_cast<double>(reads.size()) / seconds)
      .num("writes_per_s", static_cast<double>(writes.size()) / seconds)
      .object("read_wait", reads.summary())
      .object("write_wait", writes.summary())
      .integer("most_readers_at_once", counts.most_readers.load())
      .integer("overlaps", counts.overlaps.load())
      .integer("failures", counts.failures.load());
  return j;
}

}  // namespace

json run_rw(const config& cfg) {
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  int failures = 0;
  auto plain = rs.new_mutex(unique_name("rw-plain"));
  auto rw = rs.new_rw_mutex(unique_name("rw-cycle"));
  json j;
  j.object("mutex_cycle", blocking_cycle(plain, cfg, failures))
      .object("writer_cycle", blocking_cycle(rw.writer(), cfg, failures))
      .object("reader_cycle", blocking_cycle(rw.reader(), cfg, failures));
#ifdef REDSYNC_BENCH_ASIO
  auto coro = rs.new_mutex(unique_name("rw-coroutine"));
  j.object("coroutine_cycle", coroutine_cycle(coro, cfg, failures));
#endif
  j.integer("cycle_failures", failures).object("mixed", mixed(rs, cfg));
  return j;
}

}  // namespace bench
