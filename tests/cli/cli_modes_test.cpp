// The ways to run `redsync lock` besides `-- COMMAND`: hold mode (no
// command: print the lock, hold it until a signal), a shell string (-c, as
// in flock); arguments as operators type them (bare seconds, hours,
// combined short flags, errors in the tool's terms); and what the tool says
// when the command ignores a signal it forwards.
#include <doctest/doctest.h>

#include <fstream>

#include "cli_helpers.hpp"

using namespace redsync::test;

namespace {

// The value of `name=` on a line of `text`, or nullopt.
std::optional<std::string> line_value(const std::string& text, const std::string& name) {
  const std::string key = name + "=";
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = text.find('\n', at);
    if (end == std::string::npos) break;
    if (text.compare(at, key.size(), key) == 0) return text.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("cli: lock without a command holds the lock, prints it, and releases it on SIGINT or SIGTERM") {
    cluster nodes(3);
    temp_dir dir;
    for (int sig : {SIGINT, SIGTERM}) {
      cli_process p({"lock", nodes_arg(nodes), "cli-hold"}, dir.path());
      REQUIRE(
          wait_until([&] { return line_value(p.out_so_far(), "REDSYNC_FENCING_TOKEN").has_value(); }, 10s));
      const std::string out = p.out_so_far();
      INFO(out);
      CHECK(line_value(out, "REDSYNC_LOCK_NAME") == "cli-hold");
      const std::optional<std::string> value = line_value(out, "REDSYNC_LOCK_VALUE");
      REQUIRE(value.has_value());
      for (const auto& v : values_on(nodes, "cli-hold")) CHECK(v == value);
      const std::string token = *line_value(out, "REDSYNC_FENCING_TOKEN");
      CHECK(token.find_first_not_of("0123456789") == std::string::npos);

      p.signal(sig);
      auto o = p.wait(10s);
      INFO(show(o));
      CHECK(o.status == 0);
      CHECK(o.err.empty());
      CHECK(nodes_holding(nodes, "cli-hold") == 0);
    }
  }

  TEST_CASE("cli: a lock held without a command that is lost exits with the lost status") {
    cluster nodes(3);
    temp_dir dir;
    cli_process p({"lock", "--ttl", "1s", nodes_arg(nodes), "cli-hold-lost"}, dir.path());
    REQUIRE(wait_until([&] { return line_value(p.out_so_far(), "REDSYNC_FENCING_TOKEN").has_value(); }, 10s));
    nodes[0].pause();
    nodes[1].pause();
    auto o = p.wait(15s);
    nodes[0].resume();
    nodes[1].resume();
    INFO(show(o));
    CHECK(o.status == lost_status);
    CHECK(contains(o.err, "redsync: lock \"cli-hold-lost\" lost while held: "));
  }

  TEST_CASE("cli: -c runs a shell string under the lock, as flock -c does") {
    cluster nodes(3);
    temp_dir dir;
    auto o = run_cli({"lock", nodes_arg(nodes), "cli-shell", "-c",
                      "echo \"$REDSYNC_LOCK_NAME $REDSYNC_FENCING_TOKEN\" > f; exit 3"},
                     dir.path());
    INFO(show(o));
    CHECK(o.status == 3);
    CHECK(read_file(dir.file("f")).value_or("").rfind("cli-shell ", 0) == 0);
    CHECK(nodes_holding(nodes, "cli-shell") == 0);

    // Combined with other short flags, the value in the same argument.
    auto combined = run_cli({"lock", nodes_arg(nodes), "cli-shell", "-vc", "touch g"}, dir.path());
    INFO(show(combined));
    CHECK(combined.status == 0);
    CHECK(read_file(dir.file("g")).has_value());
    CHECK(contains(combined.err, "redsync: acquired lock \"cli-shell\""));
  }

  TEST_CASE("cli: durations and flags as operators type them") {
    cluster nodes(3);
    temp_dir dir;
    // Bare seconds, hours, fractions.
    auto o = run_cli({"lock", "--ttl", "5", "--wait", "10h", "--kill-grace", "0.5", nodes_arg(nodes),
                      "cli-dur", "--", "true"},
                     dir.path());
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(o.err.empty());

    // -vv: verbose, and more.
    auto vv = run_cli({"lock", "-vv", nodes_arg(nodes), "cli-dur", "--", "true"}, dir.path());
    INFO(show(vv));
    CHECK(vv.status == 0);
    CHECK(contains(vv.err, "redsync: acquired lock \"cli-dur\""));
    CHECK(contains(vv.err, "redsync: released lock \"cli-dur\""));

    // -q and -v count against each other: -qv is the default, so a failure
    // to acquire is reported; -q alone silences it.
    cli_process holder(
        {"lock", nodes_arg(nodes), "cli-dur", "--", "sh", "-c", "while [ ! -f go ]; do sleep 0.01; done"},
        dir.path());
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-dur") == 3; }, 10s));
    auto qv = run_cli({"lock", "-qv", "--wait", "0", nodes_arg(nodes), "cli-dur", "--", "true"}, dir.path());
    INFO(show(qv));
    CHECK(qv.status == not_acquired_status);
    CHECK(contains(qv.err,
                   "redsync: could not acquire lock \"cli-dur\" in one try (--wait 0): held by another "
                   "holder on 3/3 nodes"));
    CHECK_FALSE(contains(qv.err, "acquired lock"));
    auto q = run_cli({"lock", "-q", "--wait", "0", nodes_arg(nodes), "cli-dur", "--", "true"}, dir.path());
    CHECK(q.status == not_acquired_status);
    CHECK(q.err.empty());
    { std::ofstream(dir.file("go")) << "go\n"; }
    CHECK(holder.wait(10s).status == 0);
  }

  TEST_CASE("cli: a forwarded SIGINT that the command ignores is reported as such, not as acted upon") {
    cluster nodes(3);
    temp_dir dir;
    kill_leftovers cleanup{{dir.file("pid")}};
    // As a command started in the background by a non-interactive shell:
    // SIGINT ignored.
    cli_process p({"lock", "-v", nodes_arg(nodes), "cli-ignores-int", "--", "sh", "-c",
                   "trap '' INT; echo $$ > pid; while [ ! -f go ]; do sleep 0.01; done"},
                  dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("pid")).has_value(); }, 10s));
    p.signal(SIGINT);
    REQUIRE(wait_until([&] { return contains(p.err_so_far(), "ignores it"); }, 5s));
    const std::string err = p.err_so_far();
    INFO(err);
    CHECK(contains(err, "redsync: forwarded SIGINT to the command's process group, but the command (pid " +
                            std::to_string(*pid_in(dir.file("pid"))) +
                            ") ignores it, so it is still running"));
    CHECK(contains(err,
                   "lock \"cli-ignores-int\" stays held until it exits; to end it, send SIGTERM to redsync "
                   "(kill -TERM " +
                       std::to_string(p.pid()) + ")"));
    CHECK_FALSE(contains(err, "forwarded INT to the command\n"));
    // It still runs, and so does the tool, holding the lock.
    CHECK_FALSE(process_gone(*pid_in(dir.file("pid"))));
    CHECK_FALSE(p.exited());
    CHECK(nodes_holding(nodes, "cli-ignores-int") == 3);

    { std::ofstream(dir.file("go")) << "go\n"; }
    auto o = p.wait(10s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(nodes_holding(nodes, "cli-ignores-int") == 0);
  }
}  // TEST_SUITE
