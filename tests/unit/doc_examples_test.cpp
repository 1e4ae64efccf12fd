// The code examples of the public headers' comments, of the README and of
// the docs/ pages, compiled (issue 22 §5: an example that called
// `r.error()`, a data member, did not). Nothing here talks to a node: the
// functions are only compiled, and named in the test case so none goes
// unused. Each is headed by where it is copied from (file and section); an
// example that changes or moves there must change here too.

#include <redsync/fmt.hpp>
#include <redsync/redsync.hpp>

#include <doctest/doctest.h>

#include <iostream>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

using namespace std::chrono_literals;

namespace {

// What the examples leave to the application.
void queue_warning(const std::string&) {}
void write_to_storage(const std::string&, redsync::fencing_token) {}
void log(const std::string&) {}
struct storage_stub {
  void write(const std::string&, const std::string&, std::uint64_t) {}
} storage;
struct slotted_resource_stub {
  void write(std::uint32_t, redsync::fencing_token, const std::string&) {}
} resource;

// context.hpp
void context_example(redsync::Mutex& mutex) {
  std::stop_source stop;
  auto r = mutex.lock(redsync::context::timeout(2s).with(stop.get_token()));
  if (r.is(redsync::errc::cancelled)) { /* ... */
  }
  if (r.error == redsync::errc::cancelled) { /* ... */
  }
}

// fencing_token.hpp and fmt.hpp
void token_examples(redsync::Mutex& m, const redsync::context& ctx, const std::string& key,
                    const std::string& data) {
  std::cout << "token " << m.token() << "\n";
  storage.write(key, data, m.token().value);
  fmt::print("lock: {}\n", m.lock(ctx));
  fmt::print("{}\n", redsync::errc::busy);
  fmt::print("token {}\n", m.token());
}

// guard.hpp
void guard_example(redsync::Mutex& mutex, const std::string& data) {
  redsync::guard g(mutex, redsync::context::timeout(2s));
  if (!g) return log(g.outcome().describe());
  write_to_storage(data, g.token());
  if (g.lost_token().stop_requested()) return;
}

// members.hpp
void members_example() {
  // REDSYNC_NODES=redis://a:6379,redis+cluster://b1:7000,b2:7000,rediss://c:6380
  redsync::Redsync rs(redsync::members_from_env());  // three members
}

// observer.hpp
void observer_example(const std::vector<std::string>& uris) {
  struct slow_locks : redsync::observer {
    void on_acquire(const redsync::acquire_event& e) override {
      if (e.outcome.elapsed > 1s) queue_warning(e.names[0]);  // must not block
    }
  };
  redsync::Redsync rs(uris, {.observer = std::make_shared<slow_locks>()});
}

// redsync.hpp
void redsync_example() {
  redsync::Redsync rs({"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"});
  auto m = rs.new_mutex("orders:42", {.expiry = 10s, .tries = 5});
  if (auto r = m.lock(redsync::context::timeout(2s)); !r) {
    std::cerr << r.describe() << "\n";
  }
}

// README, "Usage" (its main, as a function; examples/basic.cpp is the same
// program reading the nodes through examples/nodes.hpp).
int readme_usage() try {
  redsync::Redsync rs(redsync::members_from_env());  // REDSYNC_NODES=redis://127.0.0.1:7001,...
  redsync::Mutex mutex = rs.new_mutex("example:basic", {.expiry = 10s});
  if (auto r = mutex.lock(redsync::context::timeout(5s)); !r) {
    std::cerr << "lock failed: " << r.describe() << "\n";  // why, node by node
    return 1;
  }
  // ... work that must never run twice at once; pass mutex.token() to the resource ...
  if (auto r = mutex.unlock(redsync::context::timeout(2s)); !r) std::cerr << r.describe() << "\n";
  return 0;
} catch (const redsync::config_error& e) {  // REDSYNC_NODES unset, or a bad URI in it
  std::cerr << e.what() << "\n";
  return 1;
}

// README, "The API at a glance", results, not exceptions
void readme_errors(redsync::Mutex& m) {
  using redsync::node_status;
  auto r = m.lock(redsync::context::timeout(2s));
  if (r.ok()) {                                /* held */
  } else if (r.busy()) {                       /* somebody else has it */
  } else if (r.is(redsync::errc::no_quorum)) { /* nodes down: r.nodes_with(node_status::unreachable) */
    (void)r.nodes_with(node_status::unreachable);
  } else if (r.error == redsync::errc::deadline_exceeded) { /* the same test, spelled out */
  }
}

// README, "The API at a glance": the lines that are C++ as written.
void readme_api(redsync::Redsync& rs, std::stop_source& stop) {
  redsync::Redsync rs2({"redis://a:6379", "redis://b:6379", "redis://c:6379"});
  redsync::Mutex m = rs.new_mutex("name", {.expiry = 8s});
  redsync::Mutex all = rs.new_multi_mutex({"a", "b", "c"}, {});
  redsync::RWMutex rw = rs.new_rw_mutex("name", {});
  (void)rw;
  auto ctx = redsync::context::timeout(2s).with(stop.get_token());
  (void)redsync::context::cancellable(stop.get_token());
  auto r = m.try_lock(ctx);
  r.ok();
  r.busy();
  r.is(redsync::errc::no_quorum);
  (void)r.error;
  (void)r.nodes;
  (void)r.reason;
  (void)r.describe();
  std::cout << r << redsync::errc::busy << m.token();
  fmt::print("{} {}", r, m.token());
  m.lock_async(ctx, [](redsync::result) {});
  auto f = m.lock_future(ctx);
  (void)m.try_lock_for(1s);
  (void)m.extend(5s, ctx);
  (void)m.remaining();
  m.name();
  m.names();
  m.value();
  m.until();
  m.held();
  m.token();
  m.lost();
  m.lost_token();
  m.last_result();
  (void)all;
}

// README, "Cluster members".
void readme_cluster_members() {
  redsync::Redsync rs({"redis+cluster://10.0.1.1:7000,10.0.1.2:7000",
                       "redis+cluster://10.0.2.1:7000,10.0.2.2:7000", "redis://10.0.3.1:6379"});
  auto m = rs.new_mutex("orders:42");
  (void)m;
}

// docs/observability.md, the example at its top
void readme_observer(const std::vector<std::string>& uris) {
  struct my_observer : redsync::observer {
    void on_acquire(const redsync::acquire_event& e) override { std::cout << e.token; }
    void on_release(const redsync::release_event&) override {}
    void on_extend(const redsync::extend_event&) override {}
    void on_lost(const redsync::lost_event& e) override { std::cout << e.outcome.reason; }
    void on_node(const redsync::node_event&) override {}
    void on_permit_acquire(const redsync::permit_acquire_event& e) override { std::cout << e.permit.token; }
    void on_permit_release(const redsync::permit_release_event&) override {}
    void on_permit_extend(const redsync::permit_extend_event& e) override { (void)e.automatic; }
    void on_permit_lost(const redsync::permit_lost_event& e) override { std::cout << e.permit.slot; }
  };
  redsync::Redsync rs(uris, {.observer = std::make_shared<my_observer>(),
                             .log = [](redsync::log_level, std::string_view) { /* your logger */ }});
  redsync::stats_snapshot s = rs.stats();
  std::string text = redsync::prometheus_text(s);
}

}  // namespace

// docs/api.md, "Counting semaphores"
void readme_semaphore(redsync::Redsync& rs, const std::string& data) {
  auto sem = rs.new_semaphore("jobs", 4, {.expiry = 10s});
  if (auto r = sem.acquire(redsync::context::timeout(5s)); r) {
    resource.write(r.permit.slot(), r.permit.token(), data);  // see "Fencing" below
    r.permit.release();                                       // or let the permit go out of scope
  } else {
    std::cerr << r.describe() << "\n";  // busy, no_quorum, permits_mismatch, ...
  }
}

// docs/api.md, "Counting semaphores", holding a permit safely
struct cancellable_worker {
  void cancel() {}
} worker;
void readme_semaphore_watchdog(redsync::Redsync& rs) {
  auto sem = rs.new_semaphore("jobs", 4, {.expiry = 10s, .auto_extend = true});
  auto r = sem.acquire(redsync::context::timeout(5s));
  std::stop_callback stop_work(r.permit.lost_token(),
                               [&] { worker.cancel(); });  // loop thread: must not block
}

// docs/api.md, "Reentrancy"
void reentrant_update(redsync::Mutex& m) {
  std::lock_guard inner(m);  // re-enters: nothing sent, same token
  // ...
}  // takes one hold: the lock stays
void reentrant_batch(redsync::Redsync& rs) {
  auto m = rs.new_mutex("orders:42", {.auto_extend = true, .reentrant = true});
  std::lock_guard outer(m);  // acquires
  reentrant_update(m);
}  // the last unlock releases

// docs/api.md, "Read-write locks"
void read_orders(redsync::fencing_token) {}
void rw_example(redsync::Redsync& rs) {
  auto rw = rs.new_rw_mutex("orders", {.expiry = 8s});
  if (auto r = rw.reader().lock(redsync::context::timeout(2s)); r) {  // shared
    read_orders(rw.reader().token());
    rw.reader().unlock(redsync::context{});
  }
  {
    std::unique_lock w(rw);  // exclusive: lock() / unlock()
  }
  auto other = rs.new_rw_mutex("orders");
  std::shared_lock s(other);  // shared: lock_shared() / unlock_shared()
}

TEST_CASE("the examples of the headers and the README compile") {
  const auto compiled = std::make_tuple(
      &context_example, &token_examples, &guard_example, &members_example, &observer_example,
      &redsync_example, &readme_usage, &readme_errors, &readme_api, &readme_cluster_members, &readme_observer,
      &readme_semaphore, &readme_semaphore_watchdog, &reentrant_update, &reentrant_batch, &rw_example);
  CHECK(std::tuple_size_v<std::remove_const_t<decltype(compiled)>> == 16);
}
