// `redsync lock -n K NAME` (a permit of a counting semaphore) and `redsync
// status` of a semaphore, run as the real binary against real
// redis-servers: the command's environment, at most K holders, a permit
// lost while the command runs, auto-extension, hold mode, a K that differs
// from the nodes', bad values of -n.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "cli_helpers.hpp"

using namespace redsync::test;

namespace {

std::string set_key(const std::string& name) {
  return "redsync:sem:{" + name + "}";
}

// Live permits ("<slot>:<id>") of `name` on each node that answers.
std::vector<std::vector<std::string>> permits_on(cluster& c, const std::string& name) {
  std::vector<std::vector<std::string>> out;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!c[i].running() || c[i].paused()) continue;
    redis_client client(c[i], {.timeout = 500ms});
    std::vector<std::string> members;
    for (const auto& e : client.command({"ZRANGE", set_key(name), "0", "-1"}).elements)
      members.push_back(e.str);
    out.push_back(members);
  }
  return out;
}

std::size_t nodes_with_permits(cluster& c, const std::string& name) {
  std::size_t n = 0;
  for (const auto& members : permits_on(c, name)) n += members.empty() ? 0 : 1;
  return n;
}

// A command that writes its permit's variables to `file`, then waits for
// the file "go".
std::vector<std::string> recording_command(const std::string& file) {
  return {"sh", "-c",
          "printf '%s %s %s %s %s\\n' \"$REDSYNC_LOCK_NAME\" \"$REDSYNC_PERMITS\" \"$REDSYNC_SLOT\" "
          "\"$REDSYNC_FENCING_TOKEN\" \"$REDSYNC_PERMIT_ID\" > " +
              file + ".tmp && mv " + file + ".tmp " + file + "; while [ ! -f go ]; do sleep 0.01; done"};
}

struct recorded {
  std::string name;
  int permits = 0;
  int slot = -1;
  unsigned long long token = 0;
  std::string id;
};

std::optional<recorded> read_recorded(const std::string& path) {
  const auto text = read_file(path);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  recorded r;
  if (!(in >> r.name >> r.permits >> r.slot >> r.token >> r.id)) return std::nullopt;
  return r;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE(
      "cli: lock NAME and lock -n 1 NAME never hold NAME at once, and the one refused says it is held as the "
      "other kind") {
    cluster nodes(3);
    temp_dir dir;
    const std::string name = "cli-kind-clash";
    const std::string mark("\0redsync:semaphore\0", 19);

    // A mutex holds: a permit is refused, in one try and within a wait.
    cli_process mutex_holder(lock_args(nodes, {}, name, recording_command("m")), dir.path());
    REQUIRE(wait_until([&] { return read_file(dir.file("m")).has_value(); }, 15s));
    for (const std::string wait : {"0", "1s"}) {
      CAPTURE(wait);
      auto refused =
          run_cli(lock_args(nodes, {"-n", "1", "--wait", wait}, name, {"touch", "ran"}), dir.path());
      INFO(show(refused));
      CHECK(refused.status == not_acquired_status);
      CHECK(contains(refused.err, "could not acquire a permit of semaphore \"cli-kind-clash\" (1 permits)"));
      CHECK(contains(refused.err, "\"cli-kind-clash\" is held as a mutex on 3/3 nodes"));
      CHECK_FALSE(read_file(dir.file("ran")).has_value());
    }
    CHECK(nodes_with_permits(nodes, name) == 0);
    { std::ofstream(dir.file("go")) << "go\n"; }
    auto released = mutex_holder.wait(15s);
    INFO(show(released));
    REQUIRE(released.status == 0);
    std::remove(dir.file("go").c_str());

    // A permit holds: the mutex is refused, in one try and within a wait.
    cli_process permit_holder(lock_args(nodes, {"-n", "1"}, name, recording_command("s")), dir.path());
    REQUIRE(wait_until([&] { return read_recorded(dir.file("s")).has_value(); }, 15s));
    for (std::size_t i = 0; i < nodes.size(); ++i) CHECK(redis_client(nodes[i]).get(name) == mark);
    for (const std::string wait : {"0", "1s"}) {
      CAPTURE(wait);
      auto refused = run_cli(lock_args(nodes, {"--wait", wait}, name, {"touch", "ran"}), dir.path());
      INFO(show(refused));
      CHECK(refused.status == not_acquired_status);
      CHECK(contains(refused.err, "could not acquire lock \"cli-kind-clash\""));
      CHECK(contains(refused.err, "\"cli-kind-clash\" is held as a semaphore on 3/3 nodes"));
      CHECK_FALSE(read_file(dir.file("ran")).has_value());
    }
    // `redsync status` shows the semaphore, not a mutex held by its mark.
    auto status = run_cli({"status", nodes_arg(nodes), name}, dir.path(), 10s);
    INFO(show(status));
    CHECK(contains(status.out, "semaphore \"cli-kind-clash\": 1 permits, 1 held"));
    { std::ofstream(dir.file("go")) << "go\n"; }
    auto let_go = permit_holder.wait(15s);
    INFO(show(let_go));
    REQUIRE(let_go.status == 0);

    // Once the permit is released, the mutex gets the name.
    auto granted = run_cli(lock_args(nodes, {"--wait", "10s"}, name, {"touch", "ran"}), dir.path());
    INFO(show(granted));
    CHECK(granted.status == 0);
    CHECK(read_file(dir.file("ran")).has_value());
  }

  TEST_CASE("cli: mutex and permit holders of one name started together take turns, never overlapping") {
    cluster nodes(3);
    temp_dir dir;
    const std::string name = "cli-kind-turns";
    // Each command notes an overlap if another is inside, then stays a while.
    const std::vector<std::string> critical{
        "sh", "-c",
        "if [ -e inside ]; then touch overlap; fi; touch inside; sleep 0.3; rm -f inside; touch \"done.$$\""};
    std::vector<std::unique_ptr<cli_process>> runs;
    for (int i = 0; i < 4; ++i) {
      std::vector<std::string> options{"--wait", "60s"};
      if (i % 2 == 1) options.insert(options.begin(), {"-n", "1"});
      runs.push_back(std::make_unique<cli_process>(lock_args(nodes, options, name, critical), dir.path()));
    }
    for (auto& r : runs) {
      auto o = r->wait(90s);
      INFO(show(o));
      CHECK(o.status == 0);
    }
    CHECK_FALSE(read_file(dir.file("overlap")).has_value());
  }

  TEST_CASE(
      "cli: lock -n 2 lets two commands hold a permit at once, each with its own slot, and not a third") {
    cluster nodes(3);
    temp_dir dir;
    const std::string name = "cli-sem-two";
    cli_process a(lock_args(nodes, {"-n", "2"}, name, recording_command("a")), dir.path());
    cli_process b(lock_args(nodes, {"--permits=2"}, name, recording_command("b")), dir.path());
    REQUIRE(wait_until([&] { return read_recorded(dir.file("a")) && read_recorded(dir.file("b")); }, 15s));
    const recorded ra = *read_recorded(dir.file("a"));
    const recorded rb = *read_recorded(dir.file("b"));
    CHECK(ra.name == name);
    CHECK(ra.permits == 2);
    CHECK(rb.permits == 2);
    CHECK(std::set<int>{ra.slot, rb.slot} == std::set<int>{0, 1});
    CHECK(ra.token > 0);
    CHECK(rb.token > 0);
    CHECK(ra.id.size() == 24);
    CHECK(ra.id != rb.id);
    // Both permits are on every node, under the ids the commands got.
    for (const auto& members : permits_on(nodes, name)) {
      CHECK(std::set<std::string>(members.begin(), members.end()) ==
            std::set<std::string>{std::to_string(ra.slot) + ":" + ra.id,
                                  std::to_string(rb.slot) + ":" + rb.id});
    }

    auto third =
        run_cli(lock_args(nodes, {"-n", "2", "--wait", "0"}, name, {"touch", "ran"}), dir.path(), 10s);
    INFO(show(third));
    CHECK(third.status == not_acquired_status);
    CHECK(contains(third.err,
                   "could not acquire a permit of semaphore \"cli-sem-two\" (2 permits) in one try"));
    CHECK(contains(third.err, "every permit held by others on 3/3 nodes"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());

    // A waiter says it waits, and SIGINT ends its wait without running anything.
    cli_process waiter(lock_args(nodes, {"-n", "2", "--report-every", "200ms"}, name, {"touch", "ran"}),
                       dir.path());
    REQUIRE(wait_until(
        [&] {
          return contains(waiter.err_so_far(),
                          "waiting for a permit of semaphore \"cli-sem-two\" (2 permits, ");
        },
        10s));
    waiter.signal(SIGINT);
    auto interrupted = waiter.wait(10s);
    INFO(show(interrupted));
    CHECK(interrupted.status == 128 + SIGINT);
    CHECK_FALSE(read_file(dir.file("ran")).has_value());

    // The status shows both holders, with their slots and ids.
    auto status = run_cli({"status", nodes_arg(nodes), name}, dir.path(), 10s);
    INFO(show(status));
    CHECK(status.status == 0);
    CHECK(contains(status.out, nodes.addresses()[0] + ": k 2, 2 permits: "));
    CHECK(contains(status.out, "slot " + std::to_string(ra.slot) + " id \"" + ra.id + "\" pttl "));
    CHECK(contains(status.out,
                   "permit \"" + rb.id + "\" (slot " + std::to_string(rb.slot) + ") on 3/3 nodes\n"));
    CHECK(contains(status.out, "semaphore \"cli-sem-two\": 2 permits, 2 held; 3/3 nodes answered, quorum 3"));
    auto json = run_cli({"status", "--json", nodes_arg(nodes), name}, dir.path(), 10s);
    CHECK(json.status == 0);
    CHECK(contains(json.out, "\"semaphore\":true,\"permits\":2,"));
    CHECK(contains(json.out,
                   "{\"id\":\"" + ra.id + "\",\"slot\":" + std::to_string(ra.slot) + ",\"nodes\":3}"));
    // -n with another K says the nodes would refuse it.
    auto other_k = run_cli({"status", "-n", "3", nodes_arg(nodes), name}, dir.path(), 10s);
    CHECK(contains(other_k.out, "the nodes store k 2, not -n 3"));

    { std::ofstream(dir.file("go")) << "go\n"; }
    CHECK(a.wait(10s).status == 0);
    CHECK(b.wait(10s).status == 0);
    CHECK(nodes_with_permits(nodes, name) == 0);
  }

  TEST_CASE("cli: lock -n with another K than the holders' is refused with the usage status, naming both") {
    cluster nodes(3);
    temp_dir dir;
    const std::string name = "cli-sem-k";
    cli_process a(lock_args(nodes, {"-n", "2"}, name, recording_command("a")), dir.path());
    REQUIRE(wait_until([&] { return read_recorded(dir.file("a")).has_value(); }, 15s));
    auto o = run_cli(lock_args(nodes, {"-n", "3", "--wait", "0"}, name, {"touch", "ran"}), dir.path(), 10s);
    INFO(show(o));
    CHECK(o.status == usage_status);
    CHECK(contains(o.err, "cannot acquire a permit of semaphore \"cli-sem-k\" with -n 3"));
    CHECK(contains(o.err, "made with 3 permits"));
    CHECK(contains(o.err, "stores 2"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());
    { std::ofstream(dir.file("go")) << "go\n"; }
    CHECK(a.wait(10s).status == 0);
  }

  TEST_CASE(
      "cli: a permit lost while the command runs terminates the command and exits with the lost status") {
    cluster nodes(5);
    temp_dir dir;
    const std::string name = "cli-sem-lost";
    cli_process p(lock_args(nodes, {"-n", "2", "--ttl", "1s", "--kill-grace", "1s"}, name,
                            {"sh", "-c", "echo $$ > pid; exec sleep 30"}),
                  dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("pid")).has_value(); }, 10s));
    const pid_t command_pid = *pid_in(dir.file("pid"));
    REQUIRE(wait_until([&] { return nodes_with_permits(nodes, name) == 5; }, 5s));
    // The quorum of 2 permits over 5 nodes is 4: two frozen nodes leave
    // too few for any extension.
    nodes[1].pause();
    nodes[3].pause();
    auto o = p.wait(15s);
    nodes[1].resume();
    nodes[3].resume();
    INFO(show(o));
    CHECK(o.status == lost_status);
    CHECK(contains(o.err, "of semaphore \"cli-sem-lost\" lost while running: "));
    CHECK(contains(o.err, "sent SIGTERM to the command's process group"));
    CHECK(process_gone(command_pid));
  }

  TEST_CASE("cli: a permit held longer than its ttl stays held while the command runs (auto-extension)") {
    cluster nodes(3);
    temp_dir dir;
    auto o = run_cli(lock_args(nodes, {"-n", "1", "--ttl", "600ms"}, "cli-sem-extend", {"sleep", "2"}),
                     dir.path(), 15s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(o.err.empty());
    CHECK(nodes_with_permits(nodes, "cli-sem-extend") == 0);
  }

  TEST_CASE("cli: lock -n without a command prints the permit, holds it until SIGTERM and releases it") {
    cluster nodes(3);
    temp_dir dir;
    const std::string name = "cli-sem-hold";
    cli_process p(lock_args(nodes, {"-n", "3"}, name, {}), dir.path());
    REQUIRE(wait_until([&] { return contains(p.out_so_far(), "REDSYNC_FENCING_TOKEN="); }, 10s));
    const std::string out = p.out_so_far();
    CHECK(contains(out, "REDSYNC_LOCK_NAME=cli-sem-hold\nREDSYNC_PERMITS=3\nREDSYNC_PERMIT_ID="));
    CHECK(contains(out, "\nREDSYNC_SLOT="));
    CHECK_FALSE(contains(out, "REDSYNC_LOCK_VALUE"));
    CHECK(nodes_with_permits(nodes, name) == 3);
    p.signal(SIGTERM);
    auto o = p.wait(10s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(nodes_with_permits(nodes, name) == 0);
  }

  TEST_CASE("cli: a bad -n is a usage error naming the value") {
    cluster nodes(1);
    temp_dir dir;
    for (const std::string bad : {"0", "-1", "abc", "1025", "2.5", ""}) {
      auto o =
          run_cli(lock_args(nodes, {"--permits=" + bad}, "cli-sem-bad", {"touch", "ran"}), dir.path(), 10s);
      INFO(bad, show(o));
      CHECK(o.status == usage_status);
      CHECK(
          contains(o.err, "-n/--permits: invalid number \"" + bad + "\" (expected an integer in [1, 1024])"));
    }
    auto short_form =
        run_cli(lock_args(nodes, {"-n", "0"}, "cli-sem-bad", {"touch", "ran"}), dir.path(), 10s);
    CHECK(short_form.status == usage_status);
    CHECK(contains(short_form.err, "invalid number \"0\""));
    auto fail_fast = run_cli(lock_args(nodes, {"-n", "2", "--fail-fast"}, "cli-sem-bad", {"touch", "ran"}),
                             dir.path(), 10s);
    CHECK(fail_fast.status == usage_status);
    CHECK(contains(fail_fast.err, "--fail-fast: not available with -n"));
    auto status = run_cli({"status", "-n", "x", nodes_arg(nodes), "cli-sem-bad"}, dir.path(), 10s);
    CHECK(status.status == usage_status);
    CHECK(contains(status.err, "invalid number \"x\""));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());
  }
}  // TEST_SUITE
