// `redsync lock` never waits in silence: while it waits it says why on
// stderr (a busy lock, unreachable nodes, nodes the restart guard keeps
// out), and failures that waiting cannot fix (a wrong or missing password,
// an ACL that refuses, error replies on every attempt) end it with their
// own message and exit status, with or without --wait.
#include <doctest/doctest.h>

#include <fstream>

#include "cli_helpers.hpp"

using namespace redsync::test;

namespace {

// "--nodes=redis://[user:password@]127.0.0.1:PORT,...", with these credentials.
std::string nodes_with_credentials(const cluster& c, const std::string& credentials) {
  std::string list;
  for (const auto& address : c.addresses()) {
    list += (list.empty() ? "" : ",") + std::string("redis://") + credentials + address;
  }
  return "--nodes=" + list;
}

std::size_t occurrences(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("cli: a wrong password ends lock without --wait with the refused status, naming WRONGPASS") {
    cluster nodes(3, {.password = "secret"});
    temp_dir dir;
    const std::string wrong = nodes_with_credentials(nodes, ":wrong@");
    auto o = run_cli({"lock", wrong, "cli-wrongpass", "--", "touch", "ran"}, dir.path(), 20s);
    INFO(show(o));
    CHECK(o.status == refused_status);
    // Two checks a second apart, not a silent wait.
    CHECK(o.elapsed < 10s);
    CHECK(contains(o.err, "redsync: cannot acquire lock \"cli-wrongpass\": 3/3 nodes refuse: "));
    CHECK(contains(o.err, "(WRONGPASS: wrong user name or password in the node URI)"));
    CHECK(contains(o.err, "retrying cannot fix it"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());

    // One try, and -q: an error is reported all the same.
    auto once = run_cli({"lock", "-q", "--wait", "0", wrong, "cli-wrongpass", "--", "true"}, dir.path(), 10s);
    INFO(show(once));
    CHECK(once.status == refused_status);
    CHECK(contains(once.err, "WRONGPASS"));
  }

  TEST_CASE(
      "cli: a server that needs a password and gets none is reported as NOAUTH, not as a protocol error") {
    cluster nodes(3, {.password = "secret"});
    temp_dir dir;
    const std::string none = nodes_with_credentials(nodes, "");
    for (const auto& wait : std::vector<std::string>{"--wait=0", "--wait=30s"}) {
      auto o = run_cli({"lock", wait, none, "cli-noauth", "--", "touch", "ran"}, dir.path(), 20s);
      INFO(show(o));
      CHECK(o.status == refused_status);
      CHECK(o.elapsed < 10s);
      CHECK(contains(o.err, "3/3 nodes refuse: "));
      CHECK(contains(o.err, "(NOAUTH: the server requires a password; give it in the node URI"));
      CHECK_FALSE(contains(o.err, "Protocol error"));
      CHECK_FALSE(contains(o.err, "unauthenticated"));
    }
    CHECK_FALSE(read_file(dir.file("ran")).has_value());

    auto ping = run_cli({"ping", none}, dir.path(), 10s);
    INFO(show(ping));
    CHECK(ping.status == refused_status);
    // It answered: up, but refusing.
    CHECK(contains(ping.out,
                   nodes.addresses()[0] + ": up, auth refused (NOAUTH: the server requires a password"));
    auto status = run_cli({"status", none, "cli-noauth"}, dir.path(), 10s);
    INFO(show(status));
    CHECK(status.status == refused_status);
    CHECK(contains(status.out, "0/3 nodes answered"));
  }

  TEST_CASE("cli: ping shows a node that refuses the password as up, auth refused, and counts it reachable") {
    cluster nodes(3, {.password = "secret"});
    temp_dir dir;
    auto all = run_cli({"ping", nodes_with_credentials(nodes, ":wrong@")}, dir.path(), 10s);
    INFO(show(all));
    CHECK(all.status == refused_status);  // too many refuse for a quorum
    for (const auto& address : nodes.addresses())
      CHECK(contains(all.out, address + ": up, auth refused (AUTH: WRONGPASS"));
    CHECK(contains(all.out, "3/3 nodes up, 0/3 voting"));
    CHECK_FALSE(contains(all.out, "down"));

    // One node with the wrong password: a quorum is usable, the exit says degraded.
    const auto addresses = nodes.addresses();
    const std::string mixed = "--nodes=redis://:wrong@" + addresses[0] + ",redis://:secret@" + addresses[1] +
                              ",redis://:secret@" + addresses[2];
    auto one = run_cli({"ping", "--json", mixed}, dir.path(), 10s);
    INFO(show(one));
    CHECK(one.status == 1);
    CHECK(contains(one.out, R"("auth_refused":true})"));
    CHECK(contains(one.out, R"("up":3,)"));
  }

  TEST_CASE(
      "cli: an ACL user without the rights redsync needs is refused with NOPERM and the refused status") {
    cluster nodes(3);
    temp_dir dir;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      // Everything but scripts: every lock operation runs one.
      auto r = redis_client(nodes[i]).command(
          {"ACL", "SETUSER", "locker", "on", ">pw", "~*", "&*", "+@all", "-evalsha", "-eval"});
      REQUIRE(r.type == redis_client::reply::kind::status);
    }
    auto o =
        run_cli({"lock", nodes_with_credentials(nodes, "locker:pw@"), "cli-noperm", "--", "touch", "ran"},
                dir.path(), 20s);
    INFO(show(o));
    CHECK(o.status == refused_status);
    CHECK(o.elapsed < 10s);
    CHECK(contains(o.err, "3/3 nodes refuse: "));
    CHECK(contains(o.err, "NOPERM: the ACL user lacks a right redsync needs (docs/acl.md)"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());
  }

  TEST_CASE("cli: nodes that answer every attempt with an error end the wait with the node-errors status") {
    cluster nodes(3);
    temp_dir dir;
    // The name's waiting line holds a string: every acquisition script fails
    // on it with WRONGTYPE, on two nodes of three, so no quorum can form.
    for (std::size_t i = 0; i < 2; ++i) {
      redis_client(nodes[i]).command({"SET", "cli-wrongtype:redsync-line", "not a line"});
    }
    auto o = run_cli({"lock", nodes_arg(nodes), "cli-wrongtype", "--", "touch", "ran"}, dir.path(), 20s);
    INFO(show(o));
    CHECK(o.status == node_errors_status);
    CHECK(o.elapsed < 10s);
    CHECK(contains(o.err, "2/3 nodes answer with an error: "));
    CHECK(contains(o.err, "WRONGTYPE"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());
  }

  TEST_CASE("cli: waiting for a busy lock is reported after a short while and then periodically, unless -q") {
    cluster nodes(3);
    temp_dir dir;
    cli_process holder({"lock", nodes_arg(nodes), "cli-report-busy", "--", "sh", "-c",
                        "while [ ! -f go ]; do sleep 0.01; done"},
                       dir.path());
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-report-busy") == 3; }, 10s));
    cli_process waiter(
        {"lock", "--report-every", "500ms", nodes_arg(nodes), "cli-report-busy", "--", "touch", "ran"},
        dir.path());
    cli_process quiet(
        {"lock", "-q", "--report-every", "500ms", nodes_arg(nodes), "cli-report-busy", "--", "true"},
        dir.path());
    const std::string report = "redsync: waiting for lock \"cli-report-busy\" (";
    REQUIRE(wait_until([&] { return occurrences(waiter.err_so_far(), report) >= 2; }, 10s));
    const std::string err = waiter.err_so_far();
    INFO(err);
    CHECK(contains(err, "held by another holder on 3/3 nodes; `redsync status cli-report-busy` shows who\n"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());

    { std::ofstream(dir.file("go")) << "go\n"; }
    CHECK(holder.wait(10s).status == 0);
    auto w = waiter.wait(10s);
    INFO(show(w));
    CHECK(w.status == 0);
    CHECK(read_file(dir.file("ran")).has_value());
    auto q = quiet.wait(10s);
    INFO(show(q));
    CHECK(q.status == 0);
    CHECK(q.err.empty());
  }

  TEST_CASE("cli: waiting on unreachable nodes names them on stderr until the tool is interrupted") {
    cluster nodes(3);
    temp_dir dir;
    nodes[0].kill();
    nodes[2].kill();
    cli_process waiter(
        {"lock", "--report-every", "500ms", nodes_arg(nodes), "cli-report-down", "--", "touch", "ran"},
        dir.path());
    REQUIRE(wait_until(
        [&] {
          return occurrences(waiter.err_so_far(), "redsync: waiting for lock \"cli-report-down\"") >= 2;
        },
        10s));
    const std::string err = waiter.err_so_far();
    INFO(err);
    const auto a = nodes.addresses();
    CHECK(contains(err, "2/3 nodes unreachable: " + a[0] + ", " + a[2] + " ("));
    CHECK(contains(err, "connection refused"));
    waiter.signal(SIGTERM);
    auto o = waiter.wait(5s);
    INFO(show(o));
    CHECK(o.status == 128 + SIGTERM);
    CHECK_FALSE(read_file(dir.file("ran")).has_value());
  }

  TEST_CASE(
      "cli: nodes the restart guard keeps out are reported, and give the unavailable status, not busy") {
    cluster nodes(3);
    temp_dir dir;
    // The restart guard on (the harness turns it off for the other tests):
    // nodes whose records were repaired just now vote only once a guard
    // window (here the 2 s ttl) has passed since. (Brand-new records, which
    // no node has a counter in, vote at once: node_trust.hpp.)
    prime_records(nodes.uris());
    stamp_records_now(nodes);
    const std::vector<std::string> guard_on{"REDSYNC_RESTART_GUARD"};
    auto bounded = run_cli(
        {"lock", "--ttl", "2s", "--wait", "500ms", nodes_arg(nodes), "cli-guard", "--", "touch", "ran"},
        dir.path(), 10s, guard_on);
    INFO(show(bounded));
    CHECK(bounded.status == unavailable_status);
    CHECK(contains(bounded.err, "redsync: could not acquire lock \"cli-guard\" within --wait 500 ms: "));
    CHECK(contains(bounded.err, "3/3 nodes do not vote yet: "));
    CHECK(contains(bounded.err, "restart guard"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());

    // Without --wait: reported while it waits, then acquired once the window
    // has passed.
    cli_process waiter({"lock", "--ttl", "2s", "--report-every", "500ms", nodes_arg(nodes), "cli-guard", "--",
                        "touch", "ran"},
                       dir.path(), guard_on);
    auto o = waiter.wait(15s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(read_file(dir.file("ran")).has_value());
    CHECK(contains(o.err, "redsync: waiting for lock \"cli-guard\" ("));
    CHECK(contains(o.err, "nodes do not vote yet: "));
    CHECK(contains(o.err, "its vote counts again in "));
  }
}  // TEST_SUITE
