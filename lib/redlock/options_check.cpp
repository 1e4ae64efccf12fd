// The one validation of every option struct, with messages that name the
// field and the bad value.

#include "redlock/options_check.hpp"

#include "redlock/quorum.hpp"

#include <redsync/error.hpp>

#include <fmt/format.h>

#include <chrono>
#include <utility>

namespace redsync::detail {
namespace {

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw config_error(fmt::format(format, std::forward<Args>(args)...));
}

// Durations in messages are milliseconds with as many decimals as needed
// ("2.02 ms"), so the numbers of the expiry rule can be compared by eye.
double in_ms(std::chrono::microseconds d) {
  return static_cast<double>(d.count()) / 1000.0;
}

constexpr std::size_t max_pool_size = 1024;
constexpr int max_durable_replicas = 1000;

// The files themselves are read when the node's TLS context is built
// (transport/tls_session.cpp); this checks that the fields fit together.
void check_tls_options(const node_options& node) {
  const tls_options& t = node.tls;
  if (!t.enabled) {
    const std::pair<const char*, const std::string*> paths[] = {{"ca_file", &t.ca_file},
                                                                {"ca_dir", &t.ca_dir},
                                                                {"cert_file", &t.cert_file},
                                                                {"key_file", &t.key_file},
                                                                {"server_name", &t.server_name}};
    for (const auto& [field, value] : paths) {
      if (!value->empty()) {
        fail("node_options.tls.{} = \"{}\": set, but tls.enabled is false (use rediss:// or set it)", field,
             *value);
      }
    }
    if (t.insecure_skip_verify)
      fail("node_options.tls.insecure_skip_verify = true: set, but tls.enabled is false");
    return;
  }
  if (!node.unix_path.empty()) {
    fail("node_options.tls.enabled = true with unix_path \"{}\": TLS is for TCP nodes only", node.unix_path);
  }
  if (t.cert_file.empty() != t.key_file.empty()) {
    fail("node_options.tls.{} = \"\": a client certificate needs both cert_file and key_file",
         t.cert_file.empty() ? "cert_file" : "key_file");
  }
  for (const char c : t.server_name) {
    if (c == '\0' || c == '/' || c == ' ') {
      fail("node_options.tls.server_name = \"{}\": not a host name", t.server_name);
    }
  }
}

// The auto-extension fields a mutex and a semaphore share; `what` names the
// struct. A zero interval or cap means "default" / "no cap".
void check_auto_extension(std::string_view what, std::chrono::milliseconds expiry,
                          std::chrono::milliseconds interval, std::chrono::milliseconds max_hold,
                          int max_extensions) {
  if (interval.count() < 0) {
    fail("{}.auto_extend_interval = {} ms: must not be negative", what, interval.count());
  }
  // An interval of a whole expiry or more would let the key expire between
  // two extensions.
  if (interval >= expiry) {
    fail("{}.auto_extend_interval = {} ms: must be less than expiry ({} ms)", what, interval.count(),
         expiry.count());
  }
  if (max_hold.count() < 0) {
    fail("{}.max_hold = {} ms: must not be negative", what, max_hold.count());
  }
  if (max_extensions < 0) {
    fail("{}.max_extensions = {}: must not be negative", what, max_extensions);
  }
}

// The fields a mutex and a semaphore share; `what` names the struct.
void check_timing(std::string_view what, std::chrono::milliseconds expiry, int tries, double drift_factor,
                  double timeout_factor) {
  if (expiry.count() <= 0) {
    fail("{}.expiry = {} ms: must be positive", what, expiry.count());
  }
  if (expiry > max_expiry) {
    fail("{}.expiry = {} ms: must be at most {} ms", what, expiry.count(), max_expiry.count());
  }
  if (tries < 1) {
    fail("{}.tries = {}: must be at least 1", what, tries);
  }
  // Written so that NaN fails: every comparison with NaN is false.
  if (!(drift_factor >= 0.0 && drift_factor < 1.0)) {
    fail("{}.drift_factor = {}: must be in [0, 1)", what, drift_factor);
  }
  if (!(timeout_factor > 0.0 && timeout_factor < 1.0)) {
    fail("{}.timeout_factor = {}: must be in (0, 1)", what, timeout_factor);
  }
}

// A fixed delay is checked here; a function's results are the caller's
// (a negative one counts as 0). The bound keeps `now + delay` far from the
// steady clock's overflow.
void check_retry_delay(std::string_view what, const retry_delay_option& delay) {
  if (!delay.is_fixed()) return;
  const double ms = delay.fixed_milliseconds();
  // Written so that NaN fails: every comparison with NaN is false.
  if (!(ms >= 0.0)) {
    fail("{}.retry_delay = {} ms: must not be negative", what, ms);
  }
  if (!(ms <= static_cast<double>(retry_delay_option::longest_fixed.count()))) {
    fail("{}.retry_delay = {} ms: must be at most {} ms (24 h)", what, ms,
         retry_delay_option::longest_fixed.count());
  }
}

// An attempt may wait the full per-node timeout before counting votes;
// if that plus the drift already uses up the expiry, validity can never be
// positive and every acquisition would fail.
void check_expiry_room(std::string_view what, std::chrono::milliseconds expiry, double drift_factor,
                       double timeout_factor) {
  const std::chrono::microseconds d = drift(expiry, drift_factor);
  const std::chrono::microseconds t = command_timeout(expiry, timeout_factor);
  if (expiry <= d + t) {
    fail(
        "{}.expiry = {} ms: must exceed drift ({} ms) + per-node "
        "command timeout ({} ms) = {} ms; raise expiry or lower "
        "drift_factor/timeout_factor",
        what, expiry.count(), in_ms(d), in_ms(t), in_ms(d + t));
  }
}

// Durable mode: a WAIT of at least 1 ms (WAIT 0 would block forever) that
// ends before the per-node command timeout, which bounds the script and
// the WAIT together.
void check_durable_fields(const mutex_options& o) {
  if (o.durable_replicas < 0 || o.durable_replicas > max_durable_replicas) {
    fail("mutex_options.durable_replicas = {}: must be in 0..{} (0 = off)", o.durable_replicas,
         max_durable_replicas);
  }
  if (o.durable_wait_timeout.count() < 0) {
    fail("mutex_options.durable_wait_timeout = {} ms: must not be negative", o.durable_wait_timeout.count());
  }
  if (o.durable_replicas == 0) {
    if (o.durable_wait_timeout.count() != 0) {
      fail("mutex_options.durable_wait_timeout = {} ms: set, but durable_replicas is 0 (durable mode is off)",
           o.durable_wait_timeout.count());
    }
    return;
  }
  const std::chrono::microseconds t = command_timeout(o.expiry, o.timeout_factor);
  if (o.durable_wait_timeout.count() > 0 && o.durable_wait_timeout >= t) {
    fail(
        "mutex_options.durable_wait_timeout = {} ms: must be less than the per-node command timeout "
        "({} ms = expiry * timeout_factor), which bounds the script and the WAIT together",
        o.durable_wait_timeout.count(), in_ms(t));
  }
  if (o.durable_wait_timeout.count() == 0 && t < std::chrono::milliseconds{2}) {
    fail(
        "mutex_options.durable_replicas = {}: the per-node command timeout ({} ms) leaves no room for a "
        "WAIT of at least 1 ms; raise expiry or timeout_factor",
        o.durable_replicas, in_ms(t));
  }
}

// A name is a key on the nodes (a mutex SETs it; a semaphore keeps its kind
// mark there), and its line keys are NAME:redsync-line and
// NAME:redsync-leases: a name that is one of redsync's own keys would write
// over the node record, a semaphore's set or another name's line (a
// WRONGTYPE in a holder's release, or two holders of one name).
void check_name(std::string_view what, std::string_view name) {
  if (name.empty()) {
    fail("{} name = \"\": must not be empty", what);
  }
  if (name.starts_with("redsync:") || name.ends_with(":redsync-line") || name.ends_with(":redsync-leases") ||
      name.ends_with(":redsync-readers")) {
    fail(
        "{} name = \"{}\": names that start with \"redsync:\" or end with \":redsync-line\", "
        "\":redsync-leases\" or \":redsync-readers\" are redsync's own keys",
        what, name);
  }
}

}  // namespace

void check_node_options(const node_options& node) {
  if (node.unix_path.empty()) {
    if (node.host.empty()) {
      fail("node_options.host = \"\": a host or a unix_path is required");
    }
    if (node.port < 1 || node.port > 65535) {
      fail("node_options.port = {}: must be in 1..65535", node.port);
    }
  }
  if (node.db < 0) {
    fail("node_options.db = {}: must be at least 0", node.db);
  }
  // AUTH <user> <password> needs both; a user alone is almost always a URI
  // where the password was meant (redis://secret:@host), so its value is
  // not shown: config errors end up in logs.
  if (!node.username.empty() && node.password.empty()) {
    fail("node_options.username = (not shown: it may be a password): a username needs a password");
  }
  check_tls_options(node);
}

void check_redsync_options(const redsync_options& options) {
  if (options.script_mode != script_mode::eval && options.script_mode != script_mode::functions) {
    fail("redsync_options.script_mode = {}: must be script_mode::eval or script_mode::functions",
         static_cast<int>(options.script_mode));
  }
  if (options.pool_size < 1 || options.pool_size > max_pool_size) {
    fail("redsync_options.pool_size = {}: must be in 1..{}", options.pool_size, max_pool_size);
  }
  if (options.connect_timeout.count() <= 0) {
    fail("redsync_options.connect_timeout = {} ms: must be positive", options.connect_timeout.count());
  }
  if (options.reconnect_backoff_min.count() <= 0) {
    fail("redsync_options.reconnect_backoff_min = {} ms: must be positive",
         options.reconnect_backoff_min.count());
  }
  if (options.reconnect_backoff_max < options.reconnect_backoff_min) {
    fail(
        "redsync_options.reconnect_backoff_max = {} ms: must be at least "
        "reconnect_backoff_min ({} ms)",
        options.reconnect_backoff_max.count(), options.reconnect_backoff_min.count());
  }
  if (options.restart_guard_window.count() < 0 || options.restart_guard_window > max_expiry) {
    fail("redsync_options.restart_guard_window = {} ms: must be in 0..{} ms (0 = the longest expiry in use)",
         options.restart_guard_window.count(), max_expiry.count());
  }
  if (options.shutdown_timeout.count() < 0) {
    fail("redsync_options.shutdown_timeout = {} ms: must not be negative", options.shutdown_timeout.count());
  }
}

void check_mutex_options(std::string_view name, const mutex_options& options) {
  check_name("mutex", name);
  check_timing("mutex_options", options.expiry, options.tries, options.drift_factor, options.timeout_factor);
  check_retry_delay("mutex_options", options.retry_delay);
  if (options.value) {
    if (options.value->empty()) {
      fail("mutex_options.value = \"\": must not be empty");
    }
    if (options.value->front() == '\0') {
      fail("mutex_options.value starts with a NUL byte: such values mark keys reserved for a waiter");
    }
    if (options.value->front() == '\x01') {
      fail("mutex_options.value starts with the byte 0x01: such values mark an RWMutex's readers");
    }
    if (options.value_generator) {
      fail(
          "mutex_options.value is set and so is "
          "mutex_options.value_generator: set at most one");
    }
  }
  check_auto_extension("mutex_options", options.expiry, options.auto_extend_interval, options.max_hold,
                       options.max_extensions);
  check_expiry_room("mutex_options", options.expiry, options.drift_factor, options.timeout_factor);
  check_durable_fields(options);
}

void check_semaphore_options(std::string_view name, const semaphore_options& options) {
  check_name("semaphore", name);
  check_timing("semaphore_options", options.expiry, options.tries, options.drift_factor,
               options.timeout_factor);
  check_retry_delay("semaphore_options", options.retry_delay);
  check_auto_extension("semaphore_options", options.expiry, options.auto_extend_interval, options.max_hold,
                       options.max_extensions);
  check_expiry_room("semaphore_options", options.expiry, options.drift_factor, options.timeout_factor);
}

}  // namespace redsync::detail
