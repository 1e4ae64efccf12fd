// The cost of each thing we add to bare Redlock, one rung at a time: the
// same sequential acquire + release cycle on one name, first as raw fan-outs
// on the library's transport from its loop thread (no Mutex code at all),
// then through the library's async API on the loop, then through the
// blocking API from a caller thread. Each rung adds one thing:
//   bare          SET NX PX, then a compare-and-delete script (the floor any
//                 Redlock client pays: redsync, node-redlock)
//   +fencing      MULTI; SET NX PX; HINCRBY counter; EXEC
//   +guard        + HMGET of the node record and TIME (the restart guard's
//                 inputs): our acquisition transaction (fast_acquire.hpp)
//   +line         + our release script (reserves the key for a waiter,
//                 announces it): every command our uncontended cycle sends
//   script        our acquire script instead of the transaction (how every
//                 acquisition ran before issue 12), with our release script
//   async API     the library itself, lock_async/unlock_async on the loop
//   blocking API  the library from a caller thread (two thread hops per
//                 round trip: post to the loop, wake the caller)
// Server CPU comes from each node's INFO cpu and client CPU from getrusage,
// both with microsecond resolution.

#include "back_to_back.hpp"
#include "bench.hpp"
#include "server_cpu.hpp"
#include "transport.hpp"

#include "redlock/scripts/fast_acquire.hpp"
#include "redlock/scripts/scripts.hpp"
#include "util/sha1.hpp"

#include <redsync/redsync.hpp>

#include <future>
#include <memory>
#include <string>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;
constexpr auto command_timeout = std::chrono::seconds{2};

constexpr std::string_view compare_and_delete_source =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

const rd::lua_script& compare_and_delete() {
  static const rd::lua_script s{compare_and_delete_source, rd::sha1_hex(compare_and_delete_source)};
  return s;
}

struct rung {
  std::string name;
  rd::wire_command acquire;  // sent as is (EVALSHA-free rungs) ...
  std::uint32_t acquire_replies = 1;
  rd::script_call acquire_script;  // ... or as a script
  rd::script_call release;
};

// Sends one round to every node; `done(ok)` on the loop thread once all answered.
void round_trip(transport& t, const rung& r, bool acquire, std::function<void(bool)> done) {
  struct state {
    std::size_t left;
    bool ok = true;
    std::function<void(bool)> done;
  };
  auto st = std::make_shared<state>(state{t.size(), true, std::move(done)});
  auto on_reply = [st](rd::command_result&& res) {
    st->ok = st->ok && res.status == rd::transport_status::ok && !res.value.is_error();
    if (--st->left == 0) st->done(st->ok);
  };
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!acquire)
      rd::send_script(redsync::script_mode::eval, t.member(i), 0, r.release, command_timeout, on_reply);
    else if (r.acquire_script)
      rd::send_script(redsync::script_mode::eval, t.member(i), 0, r.acquire_script, command_timeout,
                      on_reply);
    else
      t.node(i).send(0, r.acquire, command_timeout, on_reply, r.acquire_replies);
  }
}

// One raw cycle of rung `r` (its acquisition, then its release); for
// back_to_back_run, on the loop thread.
auto raw_cycle(transport& t, const rung& r) {
  return [&t, &r](auto done) {
    round_trip(t, r, true, [&t, &r, done](bool acquired) {
      round_trip(t, r, false, [done, acquired](bool released) { done(acquired && released); });
    });
  };
}

// One lock_async + unlock_async cycle of `m`, for back_to_back_run.
auto async_cycle(redsync::Mutex& m) {
  return [&m](auto done) {
    m.lock_async({}, [&m, done](redsync::result l) {
      m.unlock_async({}, [done, ok = l.ok()](redsync::result u) { done(ok && u); });
    });
  };
}

json rung_result(const std::string& name, const samples& s, json cpu, int failures) {
  json j;
  j.text("rung", name).object("cycle", s.summary()).object("cpu", cpu).integer("failures", failures);
  return j;
}

}  // namespace

json run_ladder(const config& cfg) {
  transport t(cfg.nodes);
  transport admin(cfg.nodes);
  const std::string key = unique_name("ladder");
  const std::string value = "ladder-value-0123456789abcdef";
  const std::string expiry_ms = "8000";
  const std::string line = rd::line_key(key), leases = rd::lease_key(key), channel = rd::release_channel(key);
  const std::vector<std::string_view> release_keys{key, line, leases};

  std::vector<rung> rungs;
  const auto bare_release = rd::make_script_call(compare_and_delete(), {key}, {value});
  const auto our_release = rd::make_script_call(rd::release_script(), release_keys, {value, "0", channel});
  rungs.push_back({"bare: SET NX PX + compare-and-delete",
                   rd::encode_command({"SET", key, value, "NX", "PX", expiry_ms}),
                   1,
                   {},
                   bare_release});
  {
    std::string w;
    rd::append_command(w, {"MULTI"});
    rd::append_command(w, {"SET", key, value, "NX", "PX", expiry_ms});
    rd::append_command(w, {"HINCRBY", rd::record_key, "fence", "1"});
    rd::append_command(w, {"EXEC"});
    rungs.push_back({"+fencing: MULTI, SET NX PX, HINCRBY, EXEC",
                     std::make_shared<const std::string>(std::move(w)),
                     4,
                     {},
                     bare_release});
  }
  const auto transaction = rd::encode_fast_acquire(key, value, expiry_ms);
  rungs.push_back({"+guard: + HMGET record, TIME (our acquisition transaction)",
                   transaction,
                   rd::fast_acquire_replies,
                   {},
                   bare_release});
  rungs.push_back({"+line: + our release script (our uncontended cycle's commands)",
                   transaction,
                   rd::fast_acquire_replies,
                   {},
                   our_release});
  {
    std::vector<std::string_view> keys{key, rd::record_key, line, leases};
    rungs.push_back(
        {"script: our acquire script instead of the transaction (before issue 12)", nullptr, 1,
         rd::make_script_call(rd::acquire_script(), keys, {value, expiry_ms, "1", "1000", "0", "1", channel}),
         our_release});
  }

  // The library's rungs run first: its first acquisitions stamp every node's
  // record (node_trust.hpp). The raw rungs then only raise the counter and
  // keep the window; run first, they would leave counters on unstamped
  // records, which the library rightly repairs only after a delay.
  precise_cpu cpu(admin);
  std::vector<json> library;
  redsync::Redsync rs(cfg.nodes, bench_redsync_options());
  auto m = rs.new_mutex(unique_name("ladder-lib"));
  {
    auto warm = back_to_back_run(async_cycle(m), cfg.warmup, 0);
    warm.next(0);
    warm.finished.get_future().wait();
    auto run = back_to_back_run(async_cycle(m), cfg.iterations, cfg.iterations);
    run.out.reserve(static_cast<std::size_t>(cfg.iterations));
    cpu.start();
    run.next(0);
    run.finished.get_future().wait();
    library.push_back(rung_result("async API: lock_async + unlock_async, callbacks on the loop", run.out,
                                  cpu.stop(static_cast<std::size_t>(cfg.iterations)), run.failures));
  }
  // Sequential blocking lock + unlock cycles of `mutex` from this thread.
  const auto blocking_rung = [&](const std::string& name, redsync::Mutex& mutex) {
    samples s;
    s.reserve(static_cast<std::size_t>(cfg.iterations));
    int failures = 0;
    for (int i = 0; i < cfg.warmup + cfg.iterations; ++i) {
      if (i == cfg.warmup) cpu.start();
      const auto t0 = clock::now();
      const auto l = mutex.lock(redsync::context{});
      const auto u = mutex.unlock(redsync::context{});
      if (i >= cfg.warmup) s.add(clock::now() - t0);
      if (!l || !u) ++failures;
    }
    library.push_back(rung_result(name, s, cpu.stop(static_cast<std::size_t>(cfg.iterations)), failures));
  };
  blocking_rung("blocking API: lock + unlock from a caller thread", m);
  // Each call returns once a quorum has answered, as node-redlock's do; the
  // other nodes' answers are still read (and a late yes released).
  auto fast = rs.new_mutex(unique_name("ladder-lib-fast"), {.fail_fast = true});
  blocking_rung("blocking API, fail_fast: each call returns at its quorum", fast);
  std::vector<json> out;
  for (const rung& r : rungs) {
    auto warm = back_to_back_run(raw_cycle(t, r), cfg.warmup, 0);
    t.loop().post([&warm] { warm.next(0); });
    warm.finished.get_future().wait();
    auto run = back_to_back_run(raw_cycle(t, r), cfg.iterations, cfg.iterations);
    run.out.reserve(static_cast<std::size_t>(cfg.iterations));
    cpu.start();
    t.loop().post([&run] { run.next(0); });
    run.finished.get_future().wait();
    out.push_back(
        rung_result(r.name, run.out, cpu.stop(static_cast<std::size_t>(cfg.iterations)), run.failures));
  }

  out.insert(out.end(), library.begin(), library.end());
  json j;
  j.array("rungs", out);
  return j;
}

}  // namespace bench
