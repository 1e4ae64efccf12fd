// `redsync lock --shared NAME` (an RWMutex's reader, flock -s) beside
// `redsync lock NAME` (exclusive, the default: a writer), each contender a
// process of its own, against real redis-servers: shared holders overlap, an
// exclusive one waits for them all and they for it, the refused say what
// stands in the way, `redsync status` shows the readers, and --shared with
// -n is a usage error. The bounds are generous (CI runs these on two shared
// cores under sanitizers): the tests assert order and overlap, not times.
#include <doctest/doctest.h>

#include <fstream>

#include "cli_helpers.hpp"

using namespace redsync::test;

namespace {

// A command that says it is inside (the file WHO.in), stays until the file
// "go" appears, and says it is leaving (WHO.out) just before it exits.
std::vector<std::string> inside_until_go(const std::string& who) {
  return {"sh", "-c", "touch " + who + ".in; while [ ! -f go ]; do sleep 0.02; done; touch " + who + ".out"};
}

// A command that notes (WHO.after) whether every file of `before` existed
// when it started, then says it ran (WHO.in).
std::vector<std::string> noting_whether_after(const std::string& who,
                                              const std::vector<std::string>& before) {
  std::string test;
  for (const auto& f : before) test += (test.empty() ? "" : " && ") + std::string("[ -f ") + f + " ]";
  return {"sh", "-c", "if " + test + "; then touch " + who + ".after; fi; touch " + who + ".in"};
}

bool exists(const temp_dir& dir, const std::string& name) {
  return read_file(dir.file(name)).has_value();
}

void let_go(const temp_dir& dir) {
  std::ofstream(dir.file("go")) << "go\n";
}

// The value hold mode printed: REDSYNC_LOCK_VALUE='...' (a reader's value
// starts with the byte 0x01, so it is always quoted).
std::string printed_value(const std::string& out) {
  const std::string start = "REDSYNC_LOCK_VALUE='";
  const auto from = out.find(start);
  if (from == std::string::npos) return {};
  const auto to = out.find("'\n", from + start.size());
  return to == std::string::npos ? std::string() : out.substr(from + start.size(), to - from - start.size());
}

std::size_t readers_on(cluster& c, const std::string& name) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    redis_client client(c[i], {.timeout = 500ms});
    n += static_cast<std::size_t>(client.command({"ZCARD", name + ":redsync-readers"}).integer);
  }
  return n;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE(
      "cli: two lock --shared runs hold NAME at once; an exclusive run waits, and starts its command only "
      "after both ended") {
    cluster nodes(3);
    temp_dir dir;
    const std::string name = "cli-rw-overlap";
    cli_process a(lock_args(nodes, {"--shared"}, name, inside_until_go("a")), dir.path());
    cli_process b(lock_args(nodes, {"-s"}, name, inside_until_go("b")), dir.path());
    // Neither leaves before "go": both inside at once is an overlap.
    REQUIRE(wait_until([&] { return exists(dir, "a.in") && exists(dir, "b.in"); }, 30s));
    CHECK_FALSE(exists(dir, "a.out"));
    CHECK_FALSE(exists(dir, "b.out"));
    CHECK(nodes_holding(nodes, name) == 3);  // the readers' mark
    CHECK(readers_on(nodes, name) == 6);     // two readers on each node

    // An exclusive run in one try is refused, and says readers hold NAME.
    auto refused = run_cli(lock_args(nodes, {"--wait", "0"}, name, {"touch", "ran"}), dir.path(), 30s);
    INFO(show(refused));
    CHECK(refused.status == not_acquired_status);
    CHECK(contains(
        refused.err,
        "could not acquire lock \"cli-rw-overlap\" in one try (--wait 0): \"cli-rw-overlap\" is held "
        "by readers on 3/3 nodes"));
    CHECK_FALSE(exists(dir, "ran"));

    // One that waits says why while it waits, and runs nothing yet.
    cli_process writer(lock_args(nodes, {"--wait", "120s", "--report-every", "200ms"}, name,
                                 noting_whether_after("w", {"a.out", "b.out"})),
                       dir.path());
    REQUIRE(wait_until(
        [&] { return contains(writer.err_so_far(), "\"cli-rw-overlap\" is held by readers on 3/3 nodes"); },
        30s));
    CHECK(contains(writer.err_so_far(), "waiting for lock \"cli-rw-overlap\" ("));
    CHECK_FALSE(exists(dir, "w.in"));

    let_go(dir);
    auto ra = a.wait(30s);
    INFO(show(ra));
    CHECK(ra.status == 0);
    auto rb = b.wait(30s);
    INFO(show(rb));
    CHECK(rb.status == 0);
    auto rw = writer.wait(60s);
    INFO(show(rw));
    CHECK(rw.status == 0);
    CHECK(exists(dir, "w.in"));
    // Both shared commands had ended when the exclusive one started.
    CHECK(exists(dir, "w.after"));
    CHECK(nodes_holding(nodes, name) == 0);
    CHECK(readers_on(nodes, name) == 0);
  }

  TEST_CASE("cli: an exclusive holder makes lock --shared wait, and the refused reader says a writer holds") {
    cluster nodes(3);
    temp_dir dir;
    const std::string name = "cli-rw-writer-first";
    cli_process writer(lock_args(nodes, {}, name, inside_until_go("w")), dir.path());
    REQUIRE(wait_until([&] { return exists(dir, "w.in"); }, 30s));

    auto refused = run_cli(lock_args(nodes, {"-s", "--wait", "0"}, name, {"touch", "ran"}), dir.path(), 30s);
    INFO(show(refused));
    CHECK(refused.status == not_acquired_status);
    CHECK(contains(refused.err,
                   "could not acquire shared lock \"cli-rw-writer-first\" in one try (--wait 0): "
                   "\"cli-rw-writer-first\" is held by a writer on 3/3 nodes"));
    CHECK_FALSE(exists(dir, "ran"));

    cli_process reader(lock_args(nodes, {"--shared", "--wait", "120s", "--report-every", "200ms"}, name,
                                 noting_whether_after("r", {"w.out"})),
                       dir.path());
    REQUIRE(wait_until(
        [&] {
          return contains(reader.err_so_far(), "\"cli-rw-writer-first\" is held by a writer on 3/3 nodes");
        },
        30s));
    CHECK(contains(reader.err_so_far(), "waiting for shared lock \"cli-rw-writer-first\" ("));
    CHECK_FALSE(exists(dir, "r.in"));

    let_go(dir);
    auto rw = writer.wait(30s);
    INFO(show(rw));
    CHECK(rw.status == 0);
    auto rr = reader.wait(60s);
    INFO(show(rr));
    CHECK(rr.status == 0);
    CHECK(exists(dir, "r.in"));
    CHECK(exists(dir, "r.after"));  // the exclusive command had ended
    CHECK(nodes_holding(nodes, name) == 0);
  }

  TEST_CASE(
      "cli: status of a name held by readers shows each node's live readers and each reader, and the line "
      "shows a shared waiter behind an exclusive one") {
    cluster nodes(3);
    temp_dir dir;
    const std::string name = "cli-rw-status";
    // Two shared holders in hold mode.
    cli_process a(lock_args(nodes, {"-s"}, name, {}), dir.path());
    cli_process b(lock_args(nodes, {"-s"}, name, {}), dir.path());
    REQUIRE(wait_until(
        [&] {
          return contains(a.out_so_far(), "REDSYNC_FENCING_TOKEN=") &&
                 contains(b.out_so_far(), "REDSYNC_FENCING_TOKEN=");
        },
        30s));
    const std::string a_value = printed_value(a.out_so_far());
    REQUIRE(a_value.size() > 1);
    CHECK(a_value.front() == '\x01');

    auto status = run_cli({"status", nodes_arg(nodes), name}, dir.path(), 30s);
    INFO(show(status));
    CHECK(status.status == 0);
    for (const auto& address : nodes.addresses())
      CHECK(contains(status.out, address + ": held by 2 live readers, pttl "));
    CHECK(contains(status.out, "held by reader "));
    CHECK(contains(status.out, " pid " + std::to_string(a.pid()) + ", since "));
    CHECK(contains(status.out, " pid " + std::to_string(b.pid()) + ", since "));
    CHECK(contains(status.out, "lock \"cli-rw-status\": held by readers on 3/3 nodes;"));
    // The readers' mark is nobody's value.
    CHECK_FALSE(contains(status.out, "unknown holder"));
    CHECK_FALSE(contains(status.out, "redsync:readers"));

    auto ours = run_cli({"status", nodes_arg(nodes), "--value=" + a_value, name}, dir.path(), 30s);
    INFO(show(ours));
    CHECK(contains(ours.out, "held by 2 live readers, pttl "));
    CHECK(contains(ours.out, ", ours among them"));
    CHECK(contains(ours.out, ", ours on 3/3"));

    auto json = run_cli({"status", "--json", nodes_arg(nodes), name}, dir.path(), 30s);
    INFO(show(json));
    CHECK(json.status == 0);
    CHECK(one_json_object(json.out));
    CHECK(contains(json.out, "\"held_by_readers\":3,"));
    CHECK(contains(json.out, "\"held\":3,"));
    CHECK(
        contains(json.out,
                 "\"value\":null,\"ours\":null,\"holder\":null,\"readers\":[{\"value\":\"\\u0001redsync:1:"));
    CHECK(contains(json.out, "\"nodes\":3,\"holder\":{\"user\":"));

    // An exclusive waiter, then a shared one that arrives behind it: the
    // shared one waits too, and says why.
    cli_process writer(lock_args(nodes, {"--wait", "120s"}, name, {"touch", "w.in"}), dir.path());
    REQUIRE(wait_until(
        [&] {
          auto s = run_cli({"status", nodes_arg(nodes), name}, dir.path(), 30s);
          return contains(s.out, "waiting line: 1 waiting");
        },
        30s));
    cli_process late(lock_args(nodes, {"-s", "--wait", "120s", "--report-every", "200ms"}, name,
                               noting_whether_after("c", {"w.in"})),
                     dir.path());
    REQUIRE(wait_until(
        [&] {
          return contains(
              late.err_so_far(),
              "\"cli-rw-status\" is held by readers and a writer waits ahead in its line on 3/3 nodes");
        },
        30s));
    auto line = run_cli({"status", nodes_arg(nodes), name}, dir.path(), 30s);
    INFO(show(line));
    CHECK(contains(line.out, "waiting line: 2 waiting"));
    CHECK(contains(line.out, "  1. "));
    CHECK(contains(line.out, " pid " + std::to_string(writer.pid()) + ", waiting since "));
    CHECK(contains(line.out, "  2. reader "));
    CHECK(contains(line.out, " pid " + std::to_string(late.pid()) + ", waiting since "));
    CHECK_FALSE(exists(dir, "w.in"));
    CHECK_FALSE(exists(dir, "c.in"));

    a.signal(SIGTERM);
    b.signal(SIGTERM);
    auto ra = a.wait(30s);
    INFO(show(ra));
    CHECK(ra.status == 0);
    auto rb = b.wait(30s);
    INFO(show(rb));
    CHECK(rb.status == 0);
    auto rw = writer.wait(60s);
    INFO(show(rw));
    CHECK(rw.status == 0);
    auto rc = late.wait(60s);
    INFO(show(rc));
    CHECK(rc.status == 0);
    CHECK(exists(dir, "c.in"));
    CHECK(exists(dir, "c.after"));  // served after the writer, in arrival order
    CHECK(nodes_holding(nodes, name) == 0);
  }

  TEST_CASE("cli: a shared hold longer than its ttl stays held while the command runs (auto-extension)") {
    cluster nodes(3);
    temp_dir dir;
    auto o =
        run_cli(lock_args(nodes, {"-s", "--ttl", "600ms"}, "cli-rw-extend", {"sleep", "2"}), dir.path(), 30s);
    INFO(show(o));
    CHECK(o.status == 0);
    CHECK(o.err.empty());
    CHECK(nodes_holding(nodes, "cli-rw-extend") == 0);
  }

  TEST_CASE(
      "cli: a shared hold lost while the command runs terminates the command and exits with the lost "
      "status") {
    cluster nodes(5);
    temp_dir dir;
    const std::string name = "cli-rw-lost";
    cli_process p(lock_args(nodes, {"--shared", "--ttl", "1s", "--kill-grace", "1s"}, name,
                            {"sh", "-c", "echo $$ > pid; exec sleep 60"}),
                  dir.path());
    REQUIRE(wait_until([&] { return pid_in(dir.file("pid")).has_value(); }, 30s));
    const pid_t command_pid = *pid_in(dir.file("pid"));
    REQUIRE(wait_until([&] { return readers_on(nodes, name) == 5; }, 10s));
    auto o = wait_with_three_frozen(nodes, p, 30s);
    INFO(show(o));
    CHECK(o.status == lost_status);
    CHECK(contains(o.err, "shared lock \"cli-rw-lost\" lost while running: "));
    CHECK(contains(o.err, "sent SIGTERM to the command's process group"));
    CHECK(wait_until([&] { return process_gone(command_pid); }, 10s));
  }

  TEST_CASE("cli: --shared with -n is a usage error naming both") {
    cluster nodes(1);
    temp_dir dir;
    for (const auto& options : std::vector<std::vector<std::string>>{
             {"--shared", "-n", "2"}, {"--permits=2", "-s"}, {"-s", "-n", "1", "--wait", "0"}}) {
      auto o = run_cli(lock_args(nodes, options, "cli-rw-usage", {"touch", "ran"}), dir.path(), 10s);
      INFO(show(o));
      CHECK(o.status == usage_status);
      CHECK(contains(o.err, "-s/--shared"));
      CHECK(contains(o.err, "-n/--permits"));
    }
    CHECK_FALSE(exists(dir, "ran"));
  }
}  // TEST_SUITE
