#include "redlock/options_check.hpp"
#include "redlock/quorum.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>
#include <redsync/semaphore_options.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <limits>
#include <string>

using namespace std::chrono_literals;
using redsync::config_error;
using redsync::mutex_options;
using redsync::node_options;
using redsync::redsync_options;
using redsync::detail::check_mutex_options;
using redsync::detail::check_node_options;
using redsync::detail::check_redsync_options;

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

void check_mutex(const mutex_options& o) {
  check_mutex_options("lock", o);
}

}  // namespace

// ---- node_options
// -------------------------------------------------------------

TEST_CASE("default node options are accepted") {
  CHECK_NOTHROW(check_node_options(node_options{}));
}

TEST_CASE("node port must be in 1..65535") {
  CHECK_NOTHROW(check_node_options({.port = 1}));
  CHECK_NOTHROW(check_node_options({.port = 65535}));
  CHECK_THROWS_WITH_AS(check_node_options({.port = 0}), "node_options.port = 0: must be in 1..65535",
                       config_error);
  CHECK_THROWS_WITH_AS(check_node_options({.port = 65536}), doctest::Contains("node_options.port = 65536"),
                       config_error);
  CHECK_THROWS_WITH_AS(check_node_options({.port = -1}), doctest::Contains("node_options.port = -1"),
                       config_error);
}

TEST_CASE("node port is not checked for a unix socket node") {
  CHECK_NOTHROW(check_node_options({.host = "", .port = 0, .unix_path = "/tmp/r.sock"}));
}

TEST_CASE("node db must not be negative") {
  CHECK_NOTHROW(check_node_options({.db = 0}));
  CHECK_NOTHROW(check_node_options({.db = 15}));
  CHECK_THROWS_WITH_AS(check_node_options({.db = -1}), "node_options.db = -1: must be at least 0",
                       config_error);
}

TEST_CASE("a node needs a host or a unix path") {
  CHECK_THROWS_WITH_AS(check_node_options({.host = ""}), doctest::Contains("node_options.host = \"\""),
                       config_error);
  CHECK_NOTHROW(check_node_options({.host = "", .unix_path = "/run/redis.sock"}));
}

TEST_CASE("a node username without a password is rejected, without showing it: it may be the password") {
  CHECK_THROWS_WITH_AS(check_node_options({.username = "S3CRETpw"}),
                       doctest::Contains("node_options.username = (not shown: it may be a password)"),
                       config_error);
  try {
    check_node_options(node_options::parse("redis://S3CRETpw:@h"));
    FAIL_CHECK("no config_error");
  } catch (const config_error& e) {
    CHECK(std::string(e.what()).find("S3CRETpw") == std::string::npos);
  }
  CHECK_NOTHROW(check_node_options({.username = "alice", .password = "pw"}));
  CHECK_NOTHROW(check_node_options({.password = "pw"}));
}

TEST_CASE("TLS settings without tls.enabled are rejected and named") {
  CHECK_THROWS_WITH_AS(
      check_node_options({.tls = {.ca_file = "/ca.pem"}}),
      doctest::Contains("node_options.tls.ca_file = \"/ca.pem\": set, but tls.enabled is false"),
      config_error);
  CHECK_THROWS_WITH_AS(check_node_options({.tls = {.insecure_skip_verify = true}}),
                       doctest::Contains("node_options.tls.insecure_skip_verify"), config_error);
  CHECK_NOTHROW(check_node_options({.tls = {.enabled = true}}));
}

TEST_CASE("TLS needs a TCP node and a client certificate needs both halves") {
  CHECK_THROWS_WITH_AS(check_node_options({.unix_path = "/r.sock", .tls = {.enabled = true}}),
                       doctest::Contains("TLS is for TCP nodes only"), config_error);
  CHECK_THROWS_WITH_AS(check_node_options({.tls = {.enabled = true, .cert_file = "/c.pem"}}),
                       doctest::Contains("node_options.tls.key_file = \"\""), config_error);
  CHECK_THROWS_WITH_AS(check_node_options({.tls = {.enabled = true, .key_file = "/k.pem"}}),
                       doctest::Contains("node_options.tls.cert_file = \"\""), config_error);
  CHECK_THROWS_WITH_AS(check_node_options({.tls = {.enabled = true, .server_name = "a b"}}),
                       doctest::Contains("node_options.tls.server_name = \"a b\": not a host name"),
                       config_error);
}

// ---- redsync_options
// ----------------------------------------------------------

TEST_CASE("default redsync options are accepted") {
  CHECK_NOTHROW(check_redsync_options(redsync_options{}));
}

TEST_CASE("pool size must be in 1..1024") {
  CHECK_THROWS_WITH_AS(check_redsync_options({.pool_size = 0}),
                       "redsync_options.pool_size = 0: must be in 1..1024", config_error);
  CHECK_NOTHROW(check_redsync_options({.pool_size = 1}));
  CHECK_NOTHROW(check_redsync_options({.pool_size = 1024}));
  CHECK_THROWS_WITH_AS(check_redsync_options({.pool_size = 1025}), doctest::Contains("pool_size = 1025"),
                       config_error);
}

TEST_CASE("script mode must be one of the enum's values") {
  CHECK_NOTHROW(check_redsync_options({.script_mode = redsync::script_mode::eval}));
  CHECK_NOTHROW(check_redsync_options({.script_mode = redsync::script_mode::functions}));
  CHECK_THROWS_WITH_AS(check_redsync_options({.script_mode = static_cast<redsync::script_mode>(7)}),
                       "redsync_options.script_mode = 7: must be script_mode::eval or script_mode::functions",
                       config_error);
}

TEST_CASE("connect timeout must be positive") {
  CHECK_NOTHROW(check_redsync_options({.connect_timeout = 1ms}));
  CHECK_THROWS_WITH_AS(check_redsync_options({.connect_timeout = 0ms}),
                       "redsync_options.connect_timeout = 0 ms: must be positive", config_error);
  CHECK_THROWS_WITH_AS(check_redsync_options({.connect_timeout = -5ms}),
                       doctest::Contains("connect_timeout = -5 ms"), config_error);
}

TEST_CASE("reconnect backoff needs 0 < min <= max") {
  CHECK_THROWS_WITH_AS(check_redsync_options({.reconnect_backoff_min = 0ms}),
                       doctest::Contains("reconnect_backoff_min = 0 ms"), config_error);
  CHECK_NOTHROW(check_redsync_options({.reconnect_backoff_min = 1ms, .reconnect_backoff_max = 1ms}));
  CHECK_THROWS_WITH_AS(check_redsync_options({.reconnect_backoff_min = 20ms, .reconnect_backoff_max = 19ms}),
                       "redsync_options.reconnect_backoff_max = 19 ms: must be at least "
                       "reconnect_backoff_min (20 ms)",
                       config_error);
}

TEST_CASE("the restart guard window must not be negative; 0 means the longest expiry in use") {
  CHECK_NOTHROW(check_redsync_options({.restart_guard_window = 0ms}));
  CHECK_NOTHROW(check_redsync_options({.restart_guard_window = 60s}));
  CHECK_THROWS_WITH_AS(check_redsync_options({.restart_guard_window = -1ms}),
                       doctest::Contains("redsync_options.restart_guard_window = -1 ms"), config_error);
}

// ---- mutex_options
// ------------------------------------------------------------

TEST_CASE("default mutex options are accepted") {
  CHECK_NOTHROW(check_mutex(mutex_options{}));
}

TEST_CASE("the mutex name must not be empty") {
  CHECK_THROWS_WITH_AS(check_mutex_options("", mutex_options{}), doctest::Contains("mutex name = \"\""),
                       config_error);
}

TEST_CASE("a name that is one of redsync's own keys is refused, naming it, for a mutex and a semaphore") {
  for (const char* name :
       {"redsync:node", "redsync:sem:{jobs}", "jobs:redsync-line", "jobs:redsync-leases"}) {
    CAPTURE(name);
    const std::string as_mutex = "mutex name = \"" + std::string(name) + "\"";
    const std::string as_semaphore = "semaphore name = \"" + std::string(name) + "\"";
    CHECK_THROWS_WITH_AS(check_mutex_options(name, mutex_options{}), doctest::Contains(as_mutex.c_str()),
                         config_error);
    CHECK_THROWS_WITH_AS(check_semaphore_options(name, redsync::semaphore_options{}),
                         doctest::Contains(as_semaphore.c_str()), config_error);
  }
  // Only the prefix and the two suffixes: a name merely containing them is fine.
  for (const char* name : {"jobs:redsync", "my-redsync:jobs", "jobs:redsync-line:x", "Redsync:jobs"}) {
    CAPTURE(name);
    CHECK_NOTHROW(check_mutex_options(name, mutex_options{}));
    CHECK_NOTHROW(check_semaphore_options(name, redsync::semaphore_options{}));
  }
}

TEST_CASE("expiry must be positive") {
  CHECK_THROWS_WITH_AS(check_mutex({.expiry = 0ms}), "mutex_options.expiry = 0 ms: must be positive",
                       config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.expiry = -1ms}), doctest::Contains("mutex_options.expiry = -1 ms"),
                       config_error);
}

TEST_CASE("expiry so large that microsecond arithmetic would overflow is rejected") {
  CHECK_NOTHROW(check_mutex({.expiry = redsync::detail::max_expiry}));
  CHECK_THROWS_WITH_AS(check_mutex({.expiry = std::chrono::milliseconds::max()}),
                       doctest::Contains("must be at most"), config_error);
}

TEST_CASE("tries must be at least 1") {
  CHECK_NOTHROW(check_mutex({.tries = 1}));
  CHECK_THROWS_WITH_AS(check_mutex({.tries = 0}), "mutex_options.tries = 0: must be at least 1",
                       config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.tries = -3}), doctest::Contains("mutex_options.tries = -3"),
                       config_error);
}

TEST_CASE("drift_factor must be in [0, 1)") {
  CHECK_NOTHROW(check_mutex({.drift_factor = 0.0}));
  CHECK_NOTHROW(check_mutex({.expiry = 100s, .drift_factor = 0.9}));
  CHECK_THROWS_WITH_AS(check_mutex({.drift_factor = 1.0}),
                       "mutex_options.drift_factor = 1: must be in [0, 1)", config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.drift_factor = 1.5}),
                       "mutex_options.drift_factor = 1.5: must be in [0, 1)", config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.drift_factor = -0.1}),
                       "mutex_options.drift_factor = -0.1: must be in [0, 1)", config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.drift_factor = nan}),
                       "mutex_options.drift_factor = nan: must be in [0, 1)", config_error);
}

TEST_CASE("drift_factor just below 1 passes its own rule but fails the expiry rule") {
  // 0.999 is a legal factor; with the default timeout_factor the drift and
  // the timeout together exceed the expiry, and the message says so.
  CHECK_THROWS_WITH_AS(check_mutex({.drift_factor = 0.999}), doctest::Contains("must exceed drift"),
                       config_error);
  CHECK_NOTHROW(check_mutex({.expiry = 10s, .drift_factor = 0.999, .timeout_factor = 0.0001}));
}

TEST_CASE("timeout_factor must be in (0, 1)") {
  CHECK_NOTHROW(check_mutex({.timeout_factor = 0.0001}));
  CHECK_NOTHROW(check_mutex({.drift_factor = 0.0, .timeout_factor = 0.99}));
  CHECK_THROWS_WITH_AS(check_mutex({.timeout_factor = 0.0}),
                       "mutex_options.timeout_factor = 0: must be in (0, 1)", config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.timeout_factor = 1.0}),
                       "mutex_options.timeout_factor = 1: must be in (0, 1)", config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.timeout_factor = -0.5}), doctest::Contains("timeout_factor = -0.5"),
                       config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.timeout_factor = nan}), doctest::Contains("timeout_factor = nan"),
                       config_error);
}

TEST_CASE("a fixed value must not be empty") {
  CHECK_NOTHROW(check_mutex({.value = std::string("token")}));
  CHECK_THROWS_WITH_AS(check_mutex({.value = std::string()}), "mutex_options.value = \"\": must not be empty",
                       config_error);
}

TEST_CASE("a fixed value and a value generator are not both allowed") {
  CHECK_NOTHROW(check_mutex({.value_generator = [] { return std::string("v"); }}));
  CHECK_THROWS_WITH_AS(
      check_mutex({.value_generator = [] { return std::string("v"); }, .value = std::string("token")}),
      doctest::Contains("mutex_options.value_generator"), config_error);
}

TEST_CASE("expiry must exceed drift plus the per-node timeout") {
  // 2 ms: drift = 0.02 + 2 = 2.02 ms, timeout = max(0.1, 1) = 1 ms.
  CHECK_THROWS_WITH_AS(check_mutex({.expiry = 2ms}),
                       "mutex_options.expiry = 2 ms: must exceed drift (2.02 "
                       "ms) + per-node command "
                       "timeout (1 ms) = 3.02 ms; raise expiry or lower "
                       "drift_factor/timeout_factor",
                       config_error);
  // 3 ms: drift 2.03 + timeout 1 = 3.03 ms, still not below 3 ms.
  CHECK_THROWS_WITH_AS(check_mutex({.expiry = 3ms}), doctest::Contains("must exceed drift (2.03 ms)"),
                       config_error);
  // 4 ms: 2.04 + 1 = 3.04 ms < 4 ms.
  CHECK_NOTHROW(check_mutex({.expiry = 4ms}));
}

TEST_CASE("expiry equal to drift plus timeout is rejected") {
  // drift_factor 0: drift = 2 ms; timeout_factor 0.5 of 4 ms = 2 ms; 4 = 2 + 2.
  CHECK_THROWS_WITH_AS(check_mutex({.expiry = 4ms, .drift_factor = 0.0, .timeout_factor = 0.5}),
                       doctest::Contains("= 4 ms: must exceed drift (2 ms) + per-node command timeout "
                                         "(2 ms) = 4 ms"),
                       config_error);
  CHECK_NOTHROW(check_mutex({.expiry = 5ms, .drift_factor = 0.0, .timeout_factor = 0.5}));
}

TEST_CASE("auto-extension interval must be in [0, expiry)") {
  CHECK_NOTHROW(check_mutex({.auto_extend_interval = 0ms}));
  CHECK_NOTHROW(check_mutex({.expiry = 8s, .auto_extend_interval = 7999ms}));
  CHECK_THROWS_WITH_AS(check_mutex({.expiry = 8s, .auto_extend_interval = 8s}),
                       "mutex_options.auto_extend_interval = 8000 ms: must be less than expiry "
                       "(8000 ms)",
                       config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.auto_extend_interval = -1ms}),
                       "mutex_options.auto_extend_interval = -1 ms: must not be negative", config_error);
}

TEST_CASE("reentrant is off by default and combines with every other option") {
  CHECK_FALSE(mutex_options{}.reentrant);
  CHECK_NOTHROW(check_mutex({.reentrant = true}));
  CHECK_NOTHROW(check_mutex({.value = "fixed", .auto_extend = true, .reentrant = true}));
}

TEST_CASE("auto-extension caps must not be negative; zero means no cap") {
  CHECK_NOTHROW(check_mutex({.max_hold = 0ms, .max_extensions = 0}));
  CHECK_NOTHROW(check_mutex({.max_hold = 1ms, .max_extensions = 1}));
  CHECK_THROWS_WITH_AS(check_mutex({.max_hold = -1ms}),
                       "mutex_options.max_hold = -1 ms: must not be negative", config_error);
  CHECK_THROWS_WITH_AS(check_mutex({.max_extensions = -1}),
                       "mutex_options.max_extensions = -1: must not be negative", config_error);
}
