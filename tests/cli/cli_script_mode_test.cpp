// `redsync lock --script-mode` (and $REDSYNC_SCRIPT_MODE): the tool runs the
// library's scripts as Redis Functions when asked, so a lock user whose ACL
// denies EVAL and EVALSHA (the documented functions-mode line,
// tests/support/lock_acl.hpp) can lock; and a bad mode is a usage error
// naming where it came from.
#include <doctest/doctest.h>

#include "cli_helpers.hpp"
#include "lock_acl.hpp"

#include <cstdlib>

using namespace redsync::test;
using redsync::script_mode;

namespace {

// Three servers whose only user besides `default` is `locker`, with exactly
// the documented rights of functions mode: no EVAL, no EVALSHA.
struct functions_only_cluster {
  cluster servers;

  static config with_user() {
    config cfg;
    cfg.extra_args = lock_user_args(lock_acl_rule_list(script_mode::functions));
    return cfg;
  }

  functions_only_cluster() : servers(3, with_user()) {}

  // --nodes=redis://locker:...@HOST:PORT,... : the tool runs as that user.
  std::string nodes_as_user() const {
    std::string list;
    for (const auto& address : servers.addresses()) {
      list += (list.empty() ? "" : ",") + std::string("redis://") + lock_user_info() + address;
    }
    return "--nodes=" + list;
  }

  long long calls(const std::string& command) {
    long long n = 0;
    for (std::size_t i = 0; i < servers.size(); ++i) n += redis_client(servers[i]).calls(command);
    return n;
  }
};

// Sets an environment variable for the tool runs of one test (they inherit
// the test's environment), and restores the old state.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~scoped_env() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("cli: --script-mode functions locks as a user whose ACL denies EVAL and EVALSHA") {
    functions_only_cluster nodes;
    temp_dir dir;
    // The user really cannot run scripts the eval way.
    const auto dryrun =
        redis_client(nodes.servers[0]).command({"ACL", "DRYRUN", lock_user, "EVAL", "return 1", "0"});
    REQUIRE(dryrun.type != redis_client::reply::kind::status);

    auto o = run_cli({"lock", nodes.nodes_as_user(), "--script-mode", "functions", "app:cli-fn", "--", "sh",
                      "-c", "echo token=$REDSYNC_FENCING_TOKEN"},
                     dir.path());
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(o.err.empty());
    CHECK(contains(o.out, "token="));
    CHECK_FALSE(contains(o.out, "token=\n"));
    CHECK(nodes_holding(nodes.servers, "app:cli-fn") == 0);
    CHECK(nodes.calls("fcall") > 0);
    CHECK(nodes.calls("eval") == 0);
    CHECK(nodes.calls("evalsha") == 0);
  }

  TEST_CASE("cli: REDSYNC_SCRIPT_MODE=functions has the effect of --script-mode functions") {
    functions_only_cluster nodes;
    temp_dir dir;
    const scoped_env mode("REDSYNC_SCRIPT_MODE", "functions");
    auto o = run_cli({"lock", nodes.nodes_as_user(), "app:cli-fn-env", "--", "true"}, dir.path());
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(nodes_holding(nodes.servers, "app:cli-fn-env") == 0);
    CHECK(nodes.calls("fcall") > 0);
    CHECK(nodes.calls("evalsha") == 0);
  }

  TEST_CASE("cli: without --script-mode the tool runs scripts in eval mode, which that user is refused") {
    functions_only_cluster nodes;
    temp_dir dir;
    auto o = run_cli({"lock", nodes.nodes_as_user(), "--wait", "3s", "app:cli-fn-eval", "--", "true"},
                     dir.path(), 20s, {"REDSYNC_SCRIPT_MODE"});
    INFO(show(o));
    CHECK(o.status == refused_status);
    CHECK(contains(o.err, "NOPERM"));
    CHECK(nodes.calls("fcall") == 0);
    // --script-mode wins over the environment.
    const scoped_env mode("REDSYNC_SCRIPT_MODE", "functions");
    auto forced = run_cli({"lock", nodes.nodes_as_user(), "--script-mode=eval", "--wait", "3s",
                           "app:cli-fn-eval", "--", "true"},
                          dir.path());
    INFO(show(forced));
    CHECK(forced.status == refused_status);
    CHECK(nodes.calls("fcall") == 0);
  }

  TEST_CASE("cli: --script-mode functions on servers without FUNCTION says to use --script-mode eval") {
    // rename-command FUNCTION "": on a real server, the closest model of
    // Redis < 7 for this mode (FCALL finds nothing, nothing can be loaded).
    cluster nodes(3, {.extra_args = {"--rename-command", "FUNCTION", ""}});
    temp_dir dir;
    auto o = run_cli(
        {"lock", nodes_arg(nodes), "--script-mode", "functions", "--wait", "3s", "cli-fn-old", "--", "true"},
        dir.path());
    INFO(show(o));
    CHECK(o.status == node_errors_status);
    CHECK(contains(o.err, "--script-mode is functions, but this node does not know FUNCTION"));
    CHECK(contains(o.err, "use --script-mode eval for it"));
    CHECK_FALSE(contains(o.err, "redsync_options"));
    CHECK(nodes_holding(nodes, "cli-fn-old") == 0);
    // The same servers lock in the default mode.
    auto e = run_cli({"lock", nodes_arg(nodes), "cli-fn-old", "--", "true"}, dir.path(), 20s,
                     {"REDSYNC_SCRIPT_MODE"});
    INFO(show(e));
    CHECK(e.status == 0);
  }

  TEST_CASE("cli: a bad script mode is a usage error naming the option or variable and the value") {
    temp_dir dir;
    auto bad_option =
        run_cli({"lock", "--script-mode", "fcall", "cli-bad-mode", "--", "true"}, dir.path(), 5s);
    INFO(show(bad_option));
    CHECK(bad_option.status == usage_status);
    CHECK(bad_option.err ==
          "redsync: --script-mode: invalid script mode \"fcall\" (expected eval or functions)\n");
    CHECK(bad_option.out.empty());

    const scoped_env mode("REDSYNC_SCRIPT_MODE", "Functions");
    auto bad_env = run_cli({"lock", "cli-bad-mode", "--", "true"}, dir.path(), 5s);
    INFO(show(bad_env));
    CHECK(bad_env.status == usage_status);
    CHECK(bad_env.err ==
          "redsync: REDSYNC_SCRIPT_MODE: invalid script mode \"Functions\" (expected eval or functions)\n");
  }
}
