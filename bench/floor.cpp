// Floor: one PING fan-out to every node at once on the library's transport
// (node_pool on an event_loop), timed two ways:
//  - on_loop: started and completed on the loop thread (the transport alone);
//  - from_caller: a caller thread posts the fan-out to the loop and blocks on
//    a future, as the blocking Mutex calls do (adds two thread hand-offs).

#include "back_to_back.hpp"
#include "bench.hpp"
#include "proc.hpp"
#include "transport.hpp"

#include <future>
#include <memory>

namespace bench {

namespace {

using clock = std::chrono::steady_clock;

// Sends PING to every node; `done` runs on the loop thread once all answered.
void fan_out(transport& t, const rd::wire_command& ping, std::function<void(bool)> done) {
  struct state {
    std::size_t left;
    bool ok = true;
    std::function<void(bool)> done;
  };
  auto st = std::make_shared<state>(state{t.size(), true, std::move(done)});
  for (std::size_t i = 0; i < t.size(); ++i) {
    t.node(i).send(0, ping, std::chrono::seconds{2}, [st](rd::command_result&& r) {
      st->ok = st->ok && r.status == rd::transport_status::ok && !r.value.is_error();
      if (--st->left == 0) st->done(st->ok);
    });
  }
}

}  // namespace

json run_floor(const config& cfg) {
  transport t(cfg.nodes);
  const auto ping = rd::encode_command({"PING"});
  cpu_probe cpu(node_pids(t));

  // Fan-outs back to back on the loop thread.
  auto run = back_to_back_run([&t, &ping](auto done) { fan_out(t, ping, std::move(done)); },
                              cfg.warmup + cfg.iterations, cfg.iterations);
  run.out.reserve(static_cast<std::size_t>(cfg.iterations));
  t.loop().post([&run] { run.next(0); });
  run.finished.get_future().wait();

  samples caller;
  caller.reserve(static_cast<std::size_t>(cfg.iterations));
  int caller_failures = 0;
  for (int i = 0; i < cfg.warmup + cfg.iterations; ++i) {
    if (i == cfg.warmup) cpu.start();
    std::promise<bool> done;
    const auto t0 = clock::now();
    t.loop().post([&] { fan_out(t, ping, [&done](bool ok) { done.set_value(ok); }); });
    const bool ok = done.get_future().get();
    if (i >= cfg.warmup) caller.add(clock::now() - t0);
    if (!ok) ++caller_failures;
  }

  const json usage = cpu.stop(static_cast<std::size_t>(cfg.iterations));
  json j;
  j.object("from_caller_cpu", usage)
      .integer("nodes", static_cast<std::int64_t>(t.size()))
      .object("on_loop", run.out.summary())
      .object("from_caller", caller.summary())
      .integer("failures", run.failures + caller_failures);
  return j;
}

}  // namespace bench
