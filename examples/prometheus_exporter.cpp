// Exporting a Redsync's counters to Prometheus, and its warnings to a logger.
//
// Serves `Redsync::stats()` in the Prometheus text format at
// http://127.0.0.1:PORT/metrics (PORT from REDSYNC_METRICS_PORT, default
// 9464) with GNU libmicrohttpd, while a few workers take and release a lock
// so the counters move. The log hook prints the library's warnings (a node
// unreachable or excluded, scripts reloaded) and an observer prints slow
// acquisitions. Stops after REDSYNC_DEMO_SECONDS (default 60) or on Ctrl-C.
//
//   build/examples/prometheus_exporter [redis://127.0.0.1:7001 ...]
//   curl -s http://127.0.0.1:9464/metrics
//
// Built only when libmicrohttpd is installed (scripts/deps installs it).
#include <redsync/redsync.hpp>

#include <microhttpd.h>

#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "nodes.hpp"

using namespace std::chrono_literals;

namespace {

std::atomic<bool> stopping{false};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    fmt::print(stderr, "{}: not a number: \"{}\"\n", name, v);
    std::exit(2);
  }
}

// Runs on libmicrohttpd's thread: stats() may be called from any thread and
// never blocks the library's loop.
MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method,
                      const char* /*version*/, const char* /*upload_data*/, std::size_t* /*upload_data_size*/,
                      void** /*req_cls*/) {
  if (std::string(method) != "GET") return MHD_NO;
  const auto* rs = static_cast<const redsync::Redsync*>(cls);
  const bool metrics = std::string(url) == "/metrics";
  const std::string body = metrics ? redsync::prometheus_text(rs->stats()) : std::string("see /metrics\n");
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, "Content-Type",
                          metrics ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain");
  const MHD_Result queued =
      MHD_queue_response(connection, metrics ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND, response);
  MHD_destroy_response(response);
  return queued;
}

// Must not block: it runs on the library's loop thread. Printing a line is
// quick enough for an example; a real one would hand off to its logger.
struct slow_acquisitions : redsync::observer {
  void on_acquire(const redsync::acquire_event& e) override {
    if (e.outcome && e.outcome.elapsed > 500ms)
      fmt::print(stderr, "slow: {} took {} attempts, {} ms\n", e.names[0], e.outcome.attempts,
                 std::chrono::duration_cast<std::chrono::milliseconds>(e.outcome.elapsed).count());
  }
};

}  // namespace

constexpr std::string_view usage =
    "Usage: prometheus_exporter [--help] [URI...]\n\n"
    "Serves Redsync::stats() in the Prometheus text format at\nhttp://127.0.0.1:PORT/metrics while workers "
    "take and release a lock.\n\nEnvironment: REDSYNC_METRICS_PORT (default 9464), "
    "REDSYNC_DEMO_SECONDS\n(how long it runs, default 60).\n";

int main(int argc, char** argv) try {
  const int port = env_int("REDSYNC_METRICS_PORT", 9464);
  const int seconds = env_int("REDSYNC_DEMO_SECONDS", 60);
  std::signal(SIGINT, [](int) { stopping = true; });
  std::signal(SIGTERM, [](int) { stopping = true; });

  redsync::redsync_options options;
  options.observer = std::make_shared<slow_acquisitions>();
  options.log = [](redsync::log_level level, std::string_view message) {
    if (level >= redsync::log_level::info)
      fmt::print(stderr, "[{}] {}\n", redsync::to_string(level), message);
  };
  redsync::Redsync rs(examples::node_uris(argc, argv, usage), options);

  MHD_Daemon* daemon =
      MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, static_cast<std::uint16_t>(port),
                       nullptr, nullptr, &on_request, &rs, MHD_OPTION_END);
  if (daemon == nullptr) {
    fmt::print(stderr, "cannot serve HTTP on port {} (in use?)\n", port);
    return 1;
  }
  fmt::print("metrics at http://127.0.0.1:{}/metrics for {} s\n", port, seconds);

  std::vector<std::jthread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&rs](std::stop_token stop) {
      auto m = rs.new_mutex("examples:metrics", {.expiry = 2s, .tries = 5});
      while (!stop.stop_requested()) {
        if (m.lock(redsync::context::timeout(3s))) {
          std::this_thread::sleep_for(20ms);  // the critical section
          (void)m.unlock(redsync::context::timeout(3s));
        }
        std::this_thread::sleep_for(100ms);
      }
    });
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!stopping && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(100ms);
  workers.clear();  // request stop and join
  MHD_stop_daemon(daemon);
  const auto s = rs.stats();
  fmt::print("{} acquisitions, {} failed\n", s.acquisitions.ok, s.acquisitions.total_failures());
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "prometheus_exporter: {}\n", e.what());
  return 1;
}
