// `redsync ping` and `redsync status` show which nodes do not vote yet and
// for how long, `status` shows who holds a lock (for values `redsync lock`
// made), and both have a --json form.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "cli_helpers.hpp"
#include "cluster_members.hpp"
#include "lock_acl.hpp"

using namespace redsync::test;

TEST_SUITE("cli") {
  TEST_CASE("cli: lock over cluster members, each given by its seeds in the comma-separated node list") {
    three_clusters members;
    redis_cluster& c1 = members.c1;
    temp_dir dir;
    const std::string list = members.nodes_arg();
    auto o =
        run_cli({"lock", list, "cli-cluster", "-c", "echo \"$REDSYNC_FENCING_TOKEN\" > f"}, dir.path(), 60s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK_FALSE(read_file(dir.file("f")).value_or("").empty());

    // A mixed list: a cluster member, then standalone nodes.
    cluster standalone(2);
    const auto s = standalone.uris();
    auto mixed =
        run_cli({"lock", "--nodes=" + c1.uri() + "," + s[0] + "," + s[1], "cli-mixed", "-c", "touch g"},
                dir.path(), 60s);
    INFO(show(mixed));
    CHECK(mixed.status == 0);
    CHECK(read_file(dir.file("g")).has_value());
  }

  TEST_CASE("cli: ping and status show nodes that do not vote yet, and for how long") {
    cluster nodes(3);
    temp_dir dir;
    const auto a = nodes.addresses();
    // Brand-new nodes: no record, no vote until a client has set them up.
    auto fresh = run_cli({"ping", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(fresh));
    CHECK(fresh.status == 0);
    CHECK(contains(fresh.out, a[0] + ": up, "));
    CHECK(contains(fresh.out, " us; does not vote yet: no redsync record yet (a brand-new node"));
    CHECK(contains(fresh.out, "3/3 nodes up, 0/3 voting, quorum 2\n"));

    // Set up by a client (with a 300 ms expiry): the restart guard keeps
    // them out for a window since then, the longer of the recorded 300 ms
    // and the --ttl of the client asking (8 s by default).
    prime_records(nodes.uris());
    stamp_records_now(nodes);  // as if repaired just now: brand-new records vote at once
    auto guarded = run_cli({"ping", "--json", "--ttl", "5s", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(guarded));
    CHECK(one_json_object(guarded.out));
    CHECK(contains(guarded.out, R"({"address":")" + a[0] + R"(","up":true,"round_trip_us":)"));
    CHECK(contains(guarded.out, R"("vote":"not_yet","vote_reason":"restart guard: it votes again in )"));
    CHECK(contains(guarded.out, R"("votes_in_ms":)"));
    CHECK(contains(guarded.out, R"("up":3,"voting":0,"total":3,"quorum":2})"));
    auto status = run_cli({"status", "--ttl", "5s", nodes_arg(nodes), "cli-votes"}, dir.path(), 10s);
    INFO(show(status));
    CHECK(contains(status.out, a[1] + ": absent; does not vote yet: restart guard: it votes again in "));
    CHECK(contains(status.out, "(a guard window of 5.0 s since it was first seen unverified)\n"));
    CHECK(contains(status.out, "3/3 nodes answered, 0/3 voting, quorum 2\n"));

    // For a client with a 300 ms ttl, the window has passed.
    REQUIRE(wait_until(
        [&] {
          auto o = run_cli({"ping", "--ttl", "300ms", nodes_arg(nodes)}, dir.path(), 10s);
          return contains(o.out, "3/3 nodes up, 3/3 voting, quorum 2\n");
        },
        10s));
    auto voting = run_cli({"ping", "--ttl", "300ms", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(voting));
    CHECK_FALSE(contains(voting.out, "vote yet"));

    // A restarted node lost its record's stamp: it does not vote until a
    // client has repaired it.
    nodes[2].restart();
    auto restarted = run_cli({"ping", "--ttl", "300ms", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(restarted));
    CHECK(contains(restarted.out, a[2] + ": up, "));
    CHECK(contains(restarted.out, "does not vote yet: no redsync record yet"));
    CHECK(contains(restarted.out, "3/3 nodes up, 2/3 voting, quorum 2\n"));
  }

  // Issue 21 §2: each run used to start the repair delay anew, so a
  // restarted node never voted again for `redsync lock` runs that live
  // shorter than it. The repair's progress now lives on the node.
  TEST_CASE("cli: a restarted node votes again about one --ttl after short-lived lock runs first meet it") {
    cluster nodes(3);
    temp_dir dir;
    prime_records(nodes.uris());
    nodes[2].restart();
    const auto run_id = redis_client(nodes[2]).info_field("server", "run_id");
    const auto repaired = [&] {
      redis_client c(nodes[2]);
      const auto run = c.command({"HGET", "redsync:node", "run"}).str;
      return run.rfind(run_id, 0) == 0 && c.command({"HEXISTS", "redsync:node", "pending"}).integer == 0;
    };
    const auto lock_once = [&] {
      auto o = run_cli({"lock", "--ttl", "2s", "--wait", "5s", nodes_arg(nodes), "cli-rejoin", "--", "true"},
                       dir.path(), 20s);
      INFO(show(o));
      CHECK(o.status == 0);
    };
    const auto start = std::chrono::steady_clock::now();
    lock_once();  // the first run meets node 2 and marks it
    auto met = run_cli({"ping", "--ttl", "2s", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(met));
    CHECK(contains(met.out, "; a client first met it "));
    CHECK(contains(met.out, " from now or later repairs it, and it then votes\n"));
    // One short run every 300 ms, each gone long before the 2 s repair delay.
    REQUIRE(wait_until(
        [&] {
          if (repaired()) return true;
          lock_once();
          std::this_thread::sleep_for(300ms);
          return false;
        },
        30s));
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took >= 2s);
    CHECK(took < 12s);
    auto voting = run_cli({"ping", "--ttl", "2s", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(voting));
    CHECK(contains(voting.out, "3/3 nodes up, 3/3 voting, quorum 2\n"));
  }

  TEST_CASE("cli: a node that can never vote is shown as such") {
    cluster nodes(3);
    temp_dir dir;
    prime_records(nodes.uris());
    // A maxmemory policy that may evict lock keys keeps a node out for good.
    redis_client(nodes[1]).command({"CONFIG", "SET", "maxmemory", "100mb"});
    redis_client(nodes[1]).command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
    auto o = run_cli({"ping", "--ttl", "1ms", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(o));
    CHECK(contains(o.out, nodes.addresses()[1] + ": up, "));
    CHECK(contains(o.out, " us; never votes: maxmemory-policy allkeys-lru may evict lock keys\n"));
  }

  TEST_CASE("cli: status names the holder of a lock taken by redsync lock, and an unknown holder otherwise") {
    cluster nodes(3);
    temp_dir dir;
    cli_process holder(
        {"lock", nodes_arg(nodes), "cli-holder", "--", "sh", "-c", "while [ ! -f go ]; do sleep 0.01; done"},
        dir.path());
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-holder") == 3; }, 10s));
    auto o = run_cli({"status", nodes_arg(nodes), "cli-holder"}, dir.path(), 10s);
    INFO(show(o));
    CHECK(o.status == 0);
    const std::string pid = " pid " + std::to_string(holder.pid()) + ", since ";
    CHECK(contains(o.out, "held by "));
    CHECK(contains(o.out, pid));
    CHECK(contains(o.out, " s ago) on 3/3 nodes\n"));
    const std::string value = *values_on(nodes, "cli-holder")[0];
    CHECK(value.rfind("redsync:1:", 0) == 0);

    auto json = run_cli({"status", "--json", nodes_arg(nodes), "cli-holder"}, dir.path(), 10s);
    INFO(show(json));
    CHECK(one_json_object(json.out));
    CHECK(contains(json.out, R"("name":"cli-holder","nodes":[{"address":")"));
    CHECK(contains(json.out, R"("held":true,"pttl_ms":)"));
    CHECK(contains(json.out, R"("value":")" + value + R"(","ours":null,"holder":{"user":")"));
    CHECK(contains(json.out, R"(","pid":)" + std::to_string(holder.pid()) + R"(,"since_unix_ms":)"));
    CHECK(contains(json.out, R"("holders":[{"value":")" + value + R"(","nodes":3,"holder":{)"));
    CHECK(contains(json.out, R"("held":3,"ours":null,"answered":3,"voting":)"));
    CHECK(contains(json.out, R"("total":3,"quorum":2})"));

    { std::ofstream(dir.file("go")) << "go\n"; }
    CHECK(holder.wait(10s).status == 0);

    // A value some other client set.
    for (std::size_t i = 0; i < 2; ++i) {
      redis_client(nodes[i]).command({"SET", "cli-holder", "theirs", "PX", "60000"});
    }
    auto other = run_cli({"status", nodes_arg(nodes), "cli-holder"}, dir.path(), 10s);
    INFO(show(other));
    CHECK(contains(other.out,
                   "held by an unknown holder (value \"theirs\", not made by redsync lock) on 2/3 nodes\n"));
    auto other_json = run_cli({"status", "--json", nodes_arg(nodes), "cli-holder"}, dir.path(), 10s);
    CHECK(contains(other_json.out, R"("value":"theirs","ours":null,"holder":null)"));
  }

  TEST_CASE("cli: ping --json lists every node, up or down") {
    cluster nodes(3);
    temp_dir dir;
    nodes[1].kill();
    auto o = run_cli({"ping", "--json", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(o));
    CHECK(o.status == 1);
    CHECK(one_json_object(o.out));
    CHECK(contains(
        o.out, R"({"address":")" + nodes.addresses()[1] + R"(","up":false,"round_trip_us":null,"error":")"));
    CHECK(contains(o.out, R"("up":2,"voting":0,"total":3,"quorum":2})"));
  }
}  // TEST_SUITE

TEST_SUITE("cli") {
  TEST_CASE("cli: status shows who waits in line and since when, and every node's fencing counter") {
    cluster nodes(3);
    temp_dir dir;
    cli_process holder(
        {"lock", nodes_arg(nodes), "cli-line", "--", "sh", "-c", "while [ ! -f go ]; do sleep 0.01; done"},
        dir.path());
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-line") == 3; }, 10s));
    cli_process waiter({"lock", nodes_arg(nodes), "cli-line", "--", "true"}, dir.path());
    const auto in_line = [&] {
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (redis_client(nodes[i]).command({"ZCARD", "cli-line:redsync-line"}).integer != 1) return false;
      }
      return true;
    };
    REQUIRE(wait_until(in_line, 10s));
    std::vector<std::string> fences;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      fences.push_back(redis_client(nodes[i]).command({"HGET", "redsync:node", "fence"}).str);
    }

    auto o = run_cli({"status", nodes_arg(nodes), "cli-line"}, dir.path(), 10s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(contains(o.out, "waiting line: 1 waiting\n"));
    CHECK(contains(o.out, "  1. "));
    CHECK(contains(o.out, " pid " + std::to_string(waiter.pid()) + ", waiting since "));
    CHECK(contains(o.out, " s ago), on 3/3 nodes, lease "));
    const auto a = nodes.addresses();
    CHECK(contains(o.out, "fencing counters: " + a[0] + " " + fences[0] + ", " + a[1] + " " + fences[1] +
                              ", " + a[2] + " " + fences[2] + "\n"));

    auto json = run_cli({"status", "--json", nodes_arg(nodes), "cli-line"}, dir.path(), 10s);
    INFO(show(json));
    CHECK(one_json_object(json.out));
    CHECK(contains(json.out, R"("waiting":[{"value":"redsync:1:)"));
    CHECK(contains(json.out, R"(,"pid":)" + std::to_string(waiter.pid()) + R"(,"since_unix_ms":)"));
    CHECK(contains(json.out, R"(,"nodes":3,"lease_ms":)"));
    CHECK(contains(json.out, R"("fence":)" + fences[0] + R"(,"reserved_for":null,"line_error":null})"));
    const std::string fence_max = *std::max_element(
        fences.begin(), fences.end(), [](auto& x, auto& y) { return std::stoll(x) < std::stoll(y); });
    CHECK(contains(json.out, R"("fence_max":)" + fence_max + R"(,"held":3,)"));

    { std::ofstream(dir.file("go")) << "go\n"; }
    CHECK(holder.wait(10s).status == 0);
    CHECK(waiter.wait(10s).status == 0);
    auto after = run_cli({"status", nodes_arg(nodes), "cli-line"}, dir.path(), 10s);
    INFO(show(after));
    CHECK(contains(after.out, "waiting line: nobody waits\n"));
    auto after_json = run_cli({"status", "--json", nodes_arg(nodes), "cli-line"}, dir.path(), 10s);
    CHECK(contains(after_json.out, R"("waiting":[],)"));
  }

  TEST_CASE("cli: status as the documented ACL user reads the line; without +hgetall it says unreadable") {
    cluster nodes(3);
    temp_dir dir;
    // docs/acl.md: the lock user's line plus what the tool's own commands send.
    const auto uris_for = [&](const std::string& user, bool hgetall) {
      std::string uris;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        std::vector<std::string> argv = {"ACL", "SETUSER", user, "reset", "on", ">pw"};
        for (const auto& p : lock_acl_patterns) argv.push_back(p);
        for (const auto& c : lock_acl_commands(redsync::script_mode::eval)) argv.push_back(c);
        argv.insert(argv.end(), {"+ping", "+pttl"});
        if (hgetall) argv.push_back("+hgetall");
        REQUIRE(redis_client(nodes[i]).command(argv).str == "OK");
        uris += (uris.empty() ? "" : ",") + std::string("redis://") + user + ":pw@" + nodes[i].address();
      }
      return "--nodes=" + uris;
    };
    auto documented = run_cli({"status", uris_for("documented", true), "app:cli-acl"}, dir.path(), 10s);
    INFO(show(documented));
    CHECK(documented.status == 0);
    CHECK(contains(documented.out, "waiting line: nobody waits\n"));
    CHECK_FALSE(contains(documented.out, "unreadable"));
    for (std::size_t i = 0; i < nodes.size(); ++i)
      CHECK(redis_client(nodes[i]).command({"ACL", "LOG"}).elements.empty());

    auto partial = run_cli({"status", uris_for("no-hgetall", false), "app:cli-acl"}, dir.path(), 10s);
    INFO(show(partial));
    CHECK_FALSE(contains(partial.out, "nobody waits"));
    CHECK(contains(partial.out, "waiting line: unreadable on " + nodes.addresses()[0] + " (NOPERM"));
    auto partial_json =
        run_cli({"status", "--json", uris_for("no-hgetall", false), "app:cli-acl"}, dir.path(), 10s);
    INFO(show(partial_json));
    CHECK(contains(partial_json.out, R"("waiting":null,)"));
    CHECK(contains(partial_json.out, R"(,"line_error":"NOPERM)"));
  }

  TEST_CASE("cli: status shows a key a release kept for the head of the line as not held") {
    cluster nodes(3);
    temp_dir dir;
    const std::string reserved = std::string("\0redsync:next\0", 14) + "their-value";
    for (std::size_t i = 0; i < 2; ++i) {
      redis_client(nodes[i]).command({"SET", "cli-kept", reserved, "PX", "60000"});
    }
    auto o = run_cli({"status", nodes_arg(nodes), "cli-kept"}, dir.path(), 10s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(contains(o.out, nodes.addresses()[0] +
                              ": released, kept for the head of the line (value \"their-value\") for "));
    CHECK(contains(o.out, "lock \"cli-kept\": held on 0/3 nodes"));
    CHECK(contains(o.out, "fencing counters: " + nodes.addresses()[0] + " none, "));
    auto json = run_cli({"status", "--json", nodes_arg(nodes), "cli-kept"}, dir.path(), 10s);
    INFO(show(json));
    CHECK(one_json_object(json.out));
    CHECK(contains(json.out, R"("held":false,"pttl_ms":)"));
    CHECK(contains(json.out, R"("fence":null,"reserved_for":"their-value","line_error":null})"));
    CHECK(contains(json.out, R"("fence_max":null,"held":0,)"));
  }
  // Issue 22 §10: one server under two names (127.0.0.1 and localhost) used
  // to vote twice.
  TEST_CASE("cli: lock, ping and status show that a server listed under two names never votes twice") {
    cluster nodes(2);
    temp_dir dir;
    const std::string port = std::to_string(nodes[0].port());
    const std::string first = "redis://127.0.0.1:" + port;
    const std::string second = "redis://localhost:" + port;
    const std::string list = "--nodes=" + first + "," + nodes[1].uri() + "," + second;
    prime_records({first, nodes[1].uri(), second});
    const std::string twin = "node 3 (" + second + ") is the same server as node 1 (" + first + ") (run_id ";

    // Once the restart guard's window of the priming (300 ms) has passed.
    REQUIRE(wait_until(
        [&] {
          auto o = run_cli({"ping", "--ttl", "300ms", list}, dir.path(), 10s);
          return contains(o.out, "2/3 voting");
        },
        10s));
    auto ping = run_cli({"ping", "--ttl", "300ms", list}, dir.path(), 10s);
    INFO(show(ping));
    CHECK(contains(ping.out, "localhost:" + port + ": up, "));
    CHECK(contains(ping.out, "; never votes: " + twin));
    CHECK(contains(ping.out, "3/3 nodes up, 2/3 voting, quorum 2\n"));
    auto status = run_cli({"status", "--ttl", "300ms", list, "cli-twin"}, dir.path(), 10s);
    INFO(show(status));
    CHECK(contains(status.out, "; never votes: " + twin));
    CHECK(contains(status.out, "3/3 nodes answered, 2/3 voting, quorum 2\n"));

    // With the other server down, the server listed twice is 1 vote of 3.
    nodes[1].kill();
    auto lock =
        run_cli({"lock", "--ttl", "2s", "--wait", "0", list, "cli-twin", "--", "true"}, dir.path(), 20s);
    INFO(show(lock));
    CHECK(lock.status != 0);
    CHECK(contains(lock.err, "nodes never vote: localhost:" + port + " (" + twin));
    CHECK(contains(lock.err, "one server must not vote twice"));
    CHECK_FALSE(redis_client(nodes[0]).exists("cli-twin"));
  }
}  // TEST_SUITE
