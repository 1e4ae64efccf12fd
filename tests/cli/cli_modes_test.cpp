// `redsync lock` arguments as operators type them: bare seconds, hours,
// combined short flags, and errors in the tool's own terms.
#include <doctest/doctest.h>

#include <fstream>

#include "cli_helpers.hpp"

using namespace redsync::test;

TEST_SUITE("cli") {
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
}  // TEST_SUITE
