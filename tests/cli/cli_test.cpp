// The `redsync` command-line tool, run as a real binary against real
// redis-server processes: exit statuses, the command's environment, mutual
// exclusion between two runs, a lock lost while the command runs, a stopped
// or killed tool, signal forwarding, usage errors, and the status and ping
// commands.
#include <doctest/doctest.h>

#include <fstream>

#include "cli_helpers.hpp"

using namespace redsync::test;

TEST_SUITE("cli") {
  TEST_CASE("cli: lock exits with the command's status, or 128+N when signal N killed it") {
    cluster nodes(3);
    temp_dir dir;
    auto seven = run_cli({"lock", nodes_arg(nodes), "cli-status", "--", "sh", "-c", "exit 7"}, dir.path());
    INFO(show(seven));
    CHECK(seven.status == 7);
    CHECK(seven.err.empty());
    CHECK(nodes_holding(nodes, "cli-status") == 0);

    auto killed =
        run_cli({"lock", nodes_arg(nodes), "cli-status", "--", "sh", "-c", "kill -KILL $$"}, dir.path());
    INFO(show(killed));
    CHECK(killed.status == 128 + SIGKILL);
    CHECK(nodes_holding(nodes, "cli-status") == 0);
  }

  TEST_CASE("cli: --verbose reports every node's outcome of acquire and release") {
    cluster nodes(3);
    temp_dir dir;
    auto o = run_cli({"lock", "-v", nodes_arg(nodes), "cli-verbose", "--", "true"}, dir.path());
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(contains(o.err, "redsync: acquired lock \"cli-verbose\""));
    CHECK(contains(o.err, "redsync: released lock \"cli-verbose\""));
    for (const auto& address : nodes.addresses()) CHECK(contains(o.err, address + " ok"));
  }

  TEST_CASE("cli: the command sees the lock's name, value and token, and the nodes hold that value") {
    cluster nodes(5);
    temp_dir dir;
    // The command records its environment and what `redsync status` says from
    // inside the lock, then waits for the test to let it finish.
    const std::string script =
        "printf '%s\\n%s\\n%s\\n' \"$REDSYNC_LOCK_NAME\" \"$REDSYNC_LOCK_VALUE\" "
        "\"$REDSYNC_FENCING_TOKEN\" > env.tmp && mv env.tmp env; "
        "\"$1\" status \"$REDSYNC_LOCK_NAME\" > status.txt; "
        "while [ ! -f go ]; do sleep 0.01; done";
    cli_process p({"lock", nodes_arg(nodes), "cli-env", "--", "sh", "-c", script, "sh", cli_path()},
                  dir.path());
    REQUIRE(wait_until([&] { return read_file(dir.file("env")).has_value(); }, 10s));
    const std::string env = *read_file(dir.file("env"));
    const auto first_nl = env.find('\n');
    const auto second_nl = env.find('\n', first_nl + 1);
    REQUIRE(second_nl != std::string::npos);
    const std::string name = env.substr(0, first_nl);
    const std::string value = env.substr(first_nl + 1, second_nl - first_nl - 1);
    const std::string token = env.substr(second_nl + 1);
    CHECK(name == "cli-env");
    // Made by the tool: who asked for the lock, from where and when, then
    // random bytes (tools/holder_value.hpp).
    CHECK(value.rfind("redsync:1:", 0) == 0);
    CHECK(contains(value, ":" + std::to_string(p.pid()) + ":"));
    CHECK_FALSE(token.empty());
    CHECK(token.find_first_not_of("0123456789\n") == std::string::npos);

    for (const auto& v : values_on(nodes, "cli-env")) CHECK(v == value);
    REQUIRE(wait_until(
        [&] { return read_file(dir.file("status.txt")).value_or("").find("quorum") != std::string::npos; },
        10s));
    const std::string status = *read_file(dir.file("status.txt"));
    INFO(status);
    CHECK(contains(status, "lock \"cli-env\": held on 5/5 nodes, ours on 5/5; 5/5 nodes answered, "));
    CHECK(contains(status, "quorum 3"));
    CHECK(contains(status, "held by "));
    CHECK(contains(status, nodes.addresses()[0] + ": held, pttl "));

    { std::ofstream(dir.file("go")) << "go\n"; }
    auto o = p.wait(10s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(nodes_holding(nodes, "cli-env") == 0);
  }

  TEST_CASE("cli: a second lock on the same name waits for the first and runs after it") {
    cluster nodes(3);
    temp_dir dir;
    cli_process first({"lock", nodes_arg(nodes), "cli-order", "--", "sh", "-c", "sleep 0.5; echo a >> f"},
                      dir.path());
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-order") == 3; }, 10s));
    auto second =
        run_cli({"lock", nodes_arg(nodes), "cli-order", "--", "sh", "-c", "echo b >> f"}, dir.path());
    auto first_outcome = first.wait(10s);
    INFO(show(first_outcome));
    INFO(show(second));
    CHECK(first_outcome.status == 0);
    CHECK(second.status == 0);
    CHECK(read_file(dir.file("f")) == "a\nb\n");
    CHECK(nodes_holding(nodes, "cli-order") == 0);
  }

  TEST_CASE("cli: --wait 0 on a held lock gives up after one try with the could-not-acquire status") {
    cluster nodes(3);
    temp_dir dir;
    cli_process holder(
        {"lock", nodes_arg(nodes), "cli-busy", "--", "sh", "-c", "while [ ! -f go ]; do sleep 0.01; done"},
        dir.path());
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-busy") == 3; }, 10s));

    auto once =
        run_cli({"lock", "--wait", "0", nodes_arg(nodes), "cli-busy", "--", "touch", "ran"}, dir.path(), 5s);
    INFO(show(once));
    CHECK(once.status == not_acquired_status);
    CHECK(once.elapsed < 2s);
    CHECK(contains(once.err, "redsync: could not acquire lock \"cli-busy\""));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());

    auto bounded = run_cli(
        {"lock", "--wait=300ms", "--retry-delay=50ms", nodes_arg(nodes), "cli-busy", "--", "touch", "ran"},
        dir.path(), 5s);
    INFO(show(bounded));
    CHECK(bounded.status == not_acquired_status);
    CHECK(bounded.elapsed >= 300ms);
    CHECK(bounded.elapsed < 3s);

    auto quiet =
        run_cli({"lock", "-q", "--tries", "2", nodes_arg(nodes), "cli-busy", "--", "true"}, dir.path(), 5s);
    CHECK(quiet.status == not_acquired_status);
    CHECK(quiet.err.empty());

    { std::ofstream(dir.file("go")) << "go\n"; }
    auto h = holder.wait(10s);
    CHECK(h.status == 0);
    CHECK_FALSE(read_file(dir.file("ran")).has_value());
  }

  TEST_CASE("cli: with most nodes down, lock reports the nodes unavailable") {
    cluster nodes(3);
    temp_dir dir;
    nodes[0].kill();
    nodes[1].kill();
    auto o =
        run_cli({"lock", "--wait", "0", nodes_arg(nodes), "cli-down", "--", "touch", "ran"}, dir.path(), 10s);
    INFO(show(o));
    CHECK(o.status == unavailable_status);
    CHECK(contains(o.err, "nodes unreachable"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());
  }

  TEST_CASE("cli: a lock lost while the command runs terminates the command and exits with the lost status") {
    cluster nodes(5);
    temp_dir dir;
    cli_process p({"lock", "--ttl", "1s", "--kill-grace", "1s", nodes_arg(nodes), "cli-lost", "--", "sh",
                   "-c", "echo $$ > pid; exec sleep 30"},
                  dir.path());
    REQUIRE(wait_until(
        [&] { return read_file(dir.file("pid")).value_or("").find('\n') != std::string::npos; }, 10s));
    const pid_t command_pid = std::stoi(*read_file(dir.file("pid")));
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-lost") == 5; }, 5s));

    // No extension can reach a quorum: the lock runs out within its 1 s expiry.
    auto o = wait_with_three_frozen(nodes, p, 15s);
    INFO(show(o));
    CHECK(o.status == lost_status);
    CHECK(o.elapsed < 15s);
    CHECK(contains(o.err, "redsync: lock \"cli-lost\" lost while running: "));
    CHECK(contains(o.err, "sent SIGTERM to the command's process group"));
    CHECK(process_gone(command_pid));
  }

  TEST_CASE("cli: a lock held longer than its ttl stays held while the command runs (auto-extension)") {
    cluster nodes(3);
    temp_dir dir;
    auto o = run_cli({"lock", "--ttl", "600ms", nodes_arg(nodes), "cli-extend", "--", "sleep", "2"},
                     dir.path(), 15s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(o.err.empty());
  }

  TEST_CASE("cli: SIGTERM to the tool reaches the command and the lock is released") {
    cluster nodes(5);
    temp_dir dir;
    cli_process p({"lock", nodes_arg(nodes), "cli-term", "--", "sh", "-c",
                   "trap 'echo term > got; exit 3' TERM; echo ready > ready; "
                   "while :; do sleep 0.02; done"},
                  dir.path());
    REQUIRE(wait_until([&] { return read_file(dir.file("ready")).has_value(); }, 10s));
    REQUIRE(nodes_holding(nodes, "cli-term") == 5);
    p.signal(SIGTERM);
    auto o = p.wait(10s);
    INFO(show(o));
    // 3 is the trap's status: the command got the signal and the tool passed on
    // its exit status.
    CHECK(o.status == 3);
    CHECK(read_file(dir.file("got")) == "term\n");
    CHECK(nodes_holding(nodes, "cli-term") == 0);
  }

  TEST_CASE("cli: a lost lock terminates the command's background processes too, before the tool exits") {
    cluster nodes(5);
    temp_dir dir;
    kill_leftovers cleanup{{dir.file("bgpid")}};
    // The background writer ignores nothing: only a signal to the whole group
    // stops it; the shell itself only waits.
    cli_process p(
        {"lock", "--ttl", "1s", "--kill-grace", "1s", nodes_arg(nodes), "cli-lost-group", "--", "sh", "-c",
         "(for i in $(seq 400); do echo late >> late; sleep 0.05; done) & echo $! > bgpid; wait"},
        dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("bgpid")).has_value(); }, 10s));
    const pid_t background = *pid_in(dir.file("bgpid"));
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-lost-group") == 5; }, 5s));

    auto o = wait_with_three_frozen(nodes, p, 15s);
    INFO(show(o));
    CHECK(o.status == lost_status);
    CHECK(contains(o.err, "redsync: lock \"cli-lost-group\" lost while running: "));
    // Gone by the time the tool exits: nothing writes "late" after the loss
    // was reported.
    CHECK(process_gone(background));
  }

  TEST_CASE("cli: background processes the command leaves behind do not outlive the tool") {
    cluster nodes(3);
    temp_dir dir;
    kill_leftovers cleanup{{dir.file("bgpid")}};
    auto o = run_cli({"lock", "--kill-grace", "2s", nodes_arg(nodes), "cli-leftover", "--", "sh", "-c",
                      "sleep 30 & echo $! > bgpid; exit 5"},
                     dir.path());
    INFO(show(o));
    CHECK(o.status == 5);
    REQUIRE(pid_in(dir.file("bgpid")).has_value());
    CHECK(process_gone(*pid_in(dir.file("bgpid"))));
    CHECK(nodes_holding(nodes, "cli-leftover") == 0);
  }

  TEST_CASE("cli: a SIGKILLed tool takes its command and the command's background processes with it") {
    cluster nodes(3);
    temp_dir dir;
    kill_leftovers cleanup{{dir.file("pid"), dir.file("bgpid")}};
    cli_process p({"lock", "--kill-grace", "1s", nodes_arg(nodes), "cli-tool-killed", "--", "sh", "-c",
                   "sleep 30 & echo $! > bgpid; echo $$ > pid; wait"},
                  dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("pid")) && pid_in(dir.file("bgpid")); }, 10s));
    const pid_t command = *pid_in(dir.file("pid"));
    const pid_t background = *pid_in(dir.file("bgpid"));
    p.signal(SIGKILL);
    auto o = p.wait(5s);
    INFO(show(o));
    REQUIRE(o.status == 128 + SIGKILL);
    // Bounded by --kill-grace: the group gets SIGTERM first.
    CHECK(wait_until([&] { return process_gone(command); }, 5s));
    CHECK(wait_until([&] { return process_gone(background); }, 5s));
  }

  TEST_CASE("cli: a command is killed before its lock's validity ends when the tool is stopped") {
    cluster nodes(3);
    temp_dir dir;
    kill_leftovers cleanup{{dir.file("pid")}};
    // The command ignores SIGTERM (sleep inherits the ignored disposition):
    // only a SIGKILL ends it, and --kill-grace is far longer than the ttl.
    cli_process p({"lock", "--ttl", "1s", "--kill-grace", "30s", nodes_arg(nodes), "cli-stopped", "--", "sh",
                   "-c", "trap '' TERM; echo $$ > pid; exec sleep 60"},
                  dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("pid")).has_value(); }, 10s));
    const pid_t command = *pid_in(dir.file("pid"));
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-stopped") == 3; }, 5s));

    // Stopped, the tool extends nothing and reports nothing; its last
    // extension was before the stop, so the lock's validity ends within the
    // 1 s ttl of it (2 s more are slack for sanitizer builds).
    p.signal(SIGSTOP);
    REQUIRE(wait_until([&] { return process_stopped(p.pid()); }, 5s));
    // The claim itself: once the nodes let the lock go, the command is gone.
    check_gone_before_taken_over(nodes, "cli-stopped", command);

    p.signal(SIGCONT);
    auto o = p.wait(10s);
    INFO(show(o));
    CHECK(o.status == lost_status);
    CHECK(contains(o.err, "redsync: lock \"cli-stopped\" lost while running: not extended in time"));
    CHECK(contains(o.err, "the supervisor sent SIGTERM to the command's process group "));
    CHECK(contains(o.err, " before the lock's validity ended"));
    // The SIGTERM was ignored, so the SIGKILL came too, before --kill-grace.
    CHECK(contains(o.err, " and SIGKILL "));
    CHECK(nodes_holding(nodes, "cli-stopped") == 0);
  }

  TEST_CASE("cli: a command that exits while the tool is stopped gets no signal from the supervisor") {
    cluster nodes(3);
    temp_dir dir;
    kill_leftovers cleanup{{dir.file("pid")}};
    cli_process p({"lock", "--ttl", "1s", nodes_arg(nodes), "cli-stopped-exit", "--", "sh", "-c",
                   "trap 'echo term >> got' TERM; echo $$ > pid; while [ ! -f go ]; do sleep 0.01; done"},
                  dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("pid")).has_value(); }, 10s));
    const pid_t command = *pid_in(dir.file("pid"));
    p.signal(SIGSTOP);
    REQUIRE(wait_until([&] { return process_stopped(p.pid()); }, 5s));
    // It exits on its own while the lock is still valid.
    { std::ofstream(dir.file("go")) << "go\n"; }
    check_gone_before_taken_over(nodes, "cli-stopped-exit", command);

    p.signal(SIGCONT);
    auto o = p.wait(10s);
    INFO(show(o));
    // The lock expired before the resumed tool could release it, which it
    // reports as a lost lock; but nothing was sent to the command.
    CHECK(o.status == lost_status);
    CHECK_FALSE(contains(o.err, "SIGTERM"));
    CHECK_FALSE(contains(o.err, "SIGKILL"));
    CHECK_FALSE(read_file(dir.file("got")).has_value());
  }

  TEST_CASE(
      "cli: a SIGKILLed tool's command is killed before the lock's validity ends, not after --kill-grace") {
    cluster nodes(3);
    temp_dir dir;
    kill_leftovers cleanup{{dir.file("pid")}};
    cli_process p({"lock", "--ttl", "1s", "--kill-grace", "30s", nodes_arg(nodes), "cli-killed-grace", "--",
                   "sh", "-c", "trap '' TERM; echo $$ > pid; exec sleep 60"},
                  dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("pid")).has_value(); }, 10s));
    const pid_t command = *pid_in(dir.file("pid"));
    p.signal(SIGKILL);
    auto o = p.wait(5s);
    INFO(show(o));
    REQUIRE(o.status == 128 + SIGKILL);
    // Within the ttl (plus slack), though it ignores SIGTERM and the grace is 30 s.
    check_gone_before_taken_over(nodes, "cli-killed-grace", command);
  }

  TEST_CASE("cli: SIGUSR1 to the tool is forwarded to the command instead of killing the tool") {
    cluster nodes(3);
    temp_dir dir;
    kill_leftovers cleanup{{dir.file("pid")}};
    cli_process p({"lock", nodes_arg(nodes), "cli-usr1", "--", "sh", "-c",
                   "trap 'echo usr1 > got; exit 4' USR1; echo $$ > pid; "
                   "while :; do sleep 0.02; done"},
                  dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("pid")).has_value(); }, 10s));
    p.signal(SIGUSR1);
    auto o = p.wait(10s);
    INFO(show(o));
    CHECK(o.status == 4);
    CHECK(read_file(dir.file("got")) == "usr1\n");
    CHECK(wait_until([&] { return process_gone(*pid_in(dir.file("pid"))); }, 5s));
    CHECK(nodes_holding(nodes, "cli-usr1") == 0);
  }

  TEST_CASE("cli: SIGINT while waiting for a busy lock gives up with 128+SIGINT and runs nothing") {
    cluster nodes(3);
    temp_dir dir;
    cli_process holder(
        {"lock", nodes_arg(nodes), "cli-int", "--", "sh", "-c", "while [ ! -f go ]; do sleep 0.01; done"},
        dir.path());
    REQUIRE(wait_until([&] { return nodes_holding(nodes, "cli-int") == 3; }, 10s));
    redis_client probe(nodes[0]);
    const long long sets_before = probe.calls("set");
    cli_process waiter({"lock", "--retry-delay=20ms", nodes_arg(nodes), "cli-int", "--", "touch", "ran"},
                       dir.path());
    // Two attempts seen by a node: the tool is past its start-up and in its
    // retry loop, where SIGINT must be handled, not fatal.
    REQUIRE(wait_until([&] { return probe.calls("set") >= sets_before + 2; }, 10s));
    REQUIRE_FALSE(waiter.exited());
    waiter.signal(SIGINT);
    auto w = waiter.wait(5s);
    INFO(show(w));
    CHECK(w.status == 128 + SIGINT);
    CHECK_FALSE(read_file(dir.file("ran")).has_value());
    { std::ofstream(dir.file("go")) << "go\n"; }
    CHECK(holder.wait(10s).status == 0);
  }

  TEST_CASE("cli: a command that cannot be run exits 127 or 126 and releases the lock") {
    cluster nodes(3);
    temp_dir dir;
    auto missing =
        run_cli({"lock", nodes_arg(nodes), "cli-exec", "--", "no-such-command-redsync"}, dir.path());
    INFO(show(missing));
    CHECK(missing.status == 127);
    CHECK(contains(missing.err, "redsync: cannot run \"no-such-command-redsync\""));
    { std::ofstream(dir.file("not-exec")) << "#!/bin/sh\n"; }
    auto not_exec = run_cli({"lock", nodes_arg(nodes), "cli-exec", "--", "./not-exec"}, dir.path());
    INFO(show(not_exec));
    CHECK(not_exec.status == 126);
    CHECK(nodes_holding(nodes, "cli-exec") == 0);
  }

  TEST_CASE("cli: bad arguments exit with the usage status and a message naming the bad value") {
    cluster nodes(3);
    temp_dir dir;
    const std::string n = nodes_arg(nodes);
    struct bad_case {
      std::vector<std::string> args;
      std::string message;
    };
    const std::vector<bad_case> cases{
        {{"lock", n, "--ttl", "8x", "cli-bad", "--", "true"}, "redsync: --ttl: invalid duration \"8x\""},
        {{"lock", n, "--wait=5x", "cli-bad", "--", "true"}, "redsync: --wait: invalid duration \"5x\""},
        {{"lock", n, "--wait=8d", "cli-bad", "--", "true"}, "redsync: --wait: invalid duration \"8d\""},
        {{"lock", n, "--ttl", "1ms", "cli-bad", "--", "true"},
         "redsync: --ttl 1ms is too short: it must exceed the clock-drift allowance"},
        {{"lock", n, "--drift-factor", "0.96", "cli-bad", "--", "true"},
         "redsync: --ttl 8s (the default) is too short: "},
        {{"lock", n, "-vx", "cli-bad", "--", "true"}, "redsync: unknown option \"-x\" in \"-vx\""},
        {{"lock", n, "cli-bad", "-c", "true", "--", "true"},
         "redsync: lock: give the command either after \"--\" or with -c, not both"},
        {{"lock", n, "cli-bad", "-c"}, "redsync: --command: missing value"},
        {{"lock", n, "--kill-grace", "-1s", "cli-bad", "--", "true"},
         "redsync: --kill-grace: invalid duration \"-1s\""},
        {{"lock", n, "--retry-delay", "1.5ms", "cli-bad", "--", "true"},
         "redsync: --retry-delay: invalid duration \"1.5ms\""},
        {{"lock", n, "--tries", "0", "cli-bad", "--", "true"}, "redsync: --tries: invalid number \"0\""},
        {{"lock", n, "--drift-factor", "1.5", "cli-bad", "--", "true"}, "redsync: --drift-factor"},
        {{"lock", n, "--frobnicate", "cli-bad", "--", "true"}, "redsync: unknown option \"--frobnicate\""},
        {{"lock", n, "cli-bad", "true"}, "redsync: lock: missing \"--\" before the command \"true\""},
        {{"lock", n, "cli-bad", "--"}, "redsync: lock: missing command after \"--\""},
        {{"lock", n, "--", "true"}, "redsync: lock: missing lock NAME"},
        {{"lock", "--nodes", "redis://127.0.0.1:notaport", "cli-bad", "--", "true"},
         "redis://127.0.0.1:notaport"},
        {{"lock", "--nodes", "http://127.0.0.1:6379", "cli-bad", "--", "true"}, "http://127.0.0.1:6379"},
        {{"lock", "--nodes", "redis+cluster://:S3CRETpw@127.0.0.1:1,127.0.0.1:x", "cli-bad", "--", "true"},
         "redsync: --nodes: invalid cluster URI \"redis+cluster://:***@127.0.0.1:1,127.0.0.1:x\""},
        // The TLS options reach a rediss+cluster:// member's seeds (not "no
        // node uses rediss://"), and its files are checked as a node's.
        {{"lock", "--nodes", "rediss+cluster://127.0.0.1:1,127.0.0.1:2", "--tls-ca", "/nonexistent/ca.pem",
          "cli-bad", "--", "true"},
         "redsync: --tls-ca (ca=): \"/nonexistent/ca.pem\" cannot be read"},
        {{"lock", n, "--ttl"}, "redsync: --ttl: missing value"},
        {{"lock", n, "--script-mode", "lua", "cli-bad", "--", "true"},
         "redsync: --script-mode: invalid script mode \"lua\" (expected eval or functions)"},
        {{"status", n}, "redsync: status: missing lock NAME"},
        {{"ping", n, "extra"}, "redsync: ping: unexpected argument \"extra\""},
        {{"frob"}, "redsync: unknown command \"frob\""},
        {{}, "redsync: missing command"},
    };
    for (const auto& c : cases) {
      auto o = run_cli(c.args, dir.path(), 5s);
      INFO(c.message);
      INFO(show(o));
      CHECK(o.status == usage_status);
      CHECK(contains(o.err, c.message));
      // One line: the message, nothing else.
      CHECK(o.err.find('\n') == o.err.size() - 1);
      CHECK(o.out.empty());
    }
    CHECK(nodes_holding(nodes, "cli-bad") == 0);
  }

  TEST_CASE("cli: help and version") {
    temp_dir dir;
    for (const auto& args : std::vector<std::vector<std::string>>{{"--help"}, {"help"}, {"-h"}}) {
      auto o = run_cli(args, dir.path(), 5s);
      CHECK(o.status == 0);
      CHECK(contains(o.out, "Usage: redsync COMMAND"));
      CHECK(contains(o.out, "Exit statuses:"));
    }
    for (const auto& args : std::vector<std::vector<std::string>>{{"lock", "--help"}, {"help", "lock"}}) {
      auto o = run_cli(args, dir.path(), 5s);
      CHECK(o.status == 0);
      CHECK(contains(o.out, "Usage: redsync lock [OPTIONS] NAME -- COMMAND [ARGS...]"));
      CHECK(contains(o.out, "--kill-grace"));
    }
    CHECK(contains(run_cli({"status", "--help"}, dir.path(), 5s).out, "Usage: redsync status"));
    CHECK(contains(run_cli({"ping", "-h"}, dir.path(), 5s).out, "Usage: redsync ping"));
    auto v = run_cli({"--version"}, dir.path(), 5s);
    CHECK(v.status == 0);
    CHECK(v.out.rfind("redsync ", 0) == 0);
  }

  TEST_CASE("cli: status shows each node's key, ttl and ownership, and needs a quorum of answers") {
    cluster nodes(5);
    temp_dir dir;
    for (std::size_t i = 0; i < 3; ++i) {
      redis_client(nodes[i]).command({"SET", "cli-status-key", "mine", "PX", "60000"});
    }
    redis_client(nodes[3]).command({"SET", "cli-status-key", "theirs", "PX", "60000"});

    auto o = run_cli({"status", nodes_arg(nodes), "--value", "mine", "cli-status-key"}, dir.path(), 10s);
    INFO(show(o));
    CHECK(o.status == 0);
    const auto a = nodes.addresses();
    CHECK(contains(o.out, a[0] + ": held, pttl "));
    // Fresh nodes: every line also says they do not vote yet.
    CHECK(contains(o.out, ", value \"mine\", ours; does not vote yet: no redsync record yet"));
    CHECK(contains(o.out, a[3] + ": held, pttl "));
    CHECK(contains(o.out, ", value \"theirs\", not ours; "));
    CHECK(contains(o.out, a[4] + ": absent; "));
    CHECK(contains(o.out,
                   "held by an unknown holder (value \"mine\", not made by redsync lock) on 3/5 nodes\n"));
    CHECK(contains(o.out,
                   "lock \"cli-status-key\": held on 4/5 nodes, ours on 3/5; 5/5 nodes answered, 0/5 voting, "
                   "quorum 3\n"));

    nodes[4].kill();
    auto one_down = run_cli({"status", nodes_arg(nodes), "cli-status-key"}, dir.path(), 10s);
    INFO(show(one_down));
    CHECK(one_down.status == 0);
    CHECK(contains(one_down.out, a[4] + ": down ("));
    CHECK(contains(one_down.out,
                   "lock \"cli-status-key\": held on 4/5 nodes; 4/5 nodes answered, 0/5 voting, quorum 3\n"));

    // A frozen node costs one timeout, not a hang.
    nodes[3].pause();
    nodes[2].kill();
    auto no_quorum =
        run_cli({"status", nodes_arg(nodes), "--timeout", "300ms", "cli-status-key"}, dir.path(), 10s);
    nodes[3].resume();
    INFO(show(no_quorum));
    CHECK(no_quorum.status == unavailable_status);
    CHECK(no_quorum.elapsed < 3s);
    CHECK(contains(no_quorum.out, "2/5 nodes answered, 0/5 voting, quorum 3\n"));
  }

  TEST_CASE("cli: ping reports every node's round trip and exits 0, 1 or 69 by how many are up") {
    cluster nodes(5);
    temp_dir dir;
    const auto a = nodes.addresses();
    auto all = run_cli({"ping", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(all));
    CHECK(all.status == 0);
    for (const auto& address : a) CHECK(contains(all.out, address + ": up, "));
    CHECK(contains(all.out, " us; does not vote yet: "));
    CHECK(contains(all.out, "5/5 nodes up, 0/5 voting, quorum 3\n"));

    nodes[1].kill();
    auto one_down = run_cli({"ping", nodes_arg(nodes)}, dir.path(), 10s);
    INFO(show(one_down));
    CHECK(one_down.status == 1);
    CHECK(contains(one_down.out, a[1] + ": down ("));
    CHECK(contains(one_down.out, "4/5 nodes up, 0/5 voting, quorum 3\n"));

    nodes[2].kill();
    nodes[3].pause();
    auto no_quorum = run_cli({"ping", nodes_arg(nodes), "--timeout=300ms"}, dir.path(), 10s);
    nodes[3].resume();
    INFO(show(no_quorum));
    CHECK(no_quorum.status == unavailable_status);
    CHECK(no_quorum.elapsed < 3s);
    CHECK(contains(no_quorum.out, a[3] + ": down ("));
    CHECK(contains(no_quorum.out, "2/5 nodes up, 0/5 voting, quorum 3\n"));
  }

}  // TEST_SUITE
