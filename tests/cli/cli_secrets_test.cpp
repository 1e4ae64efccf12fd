// The `redsync` tool never prints a password a node URI holds (issue 26):
// usage errors about --nodes, in every form a secret can take, go through
// the real binary. No node is reached: every case fails before connecting.
#include <doctest/doctest.h>

#include "cli_helpers.hpp"

using namespace redsync::test;

TEST_SUITE("cli") {
  TEST_CASE("cli: usage errors about --nodes never show a password the URIs hold") {
    temp_dir dir;
    struct secret_case {
      std::string nodes;
      std::string message;  // what the error still says
    };
    const std::vector<secret_case> cases{
        // Only lowercase "password=" used to be masked.
        {"rediss://127.0.0.1:6380?Password=S3CRETpw", "\"rediss://127.0.0.1:6380?Password=***\""},
        {"rediss://127.0.0.1:6380?PASSWORD=S3CRETpw", "\"rediss://127.0.0.1:6380?PASSWORD=***\""},
        {"rediss://127.0.0.1:6380?pass%77ord=S3CRETpw", "\"rediss://127.0.0.1:6380?pass%77ord=***\""},
        // Lone user info: Lettuce reads it as the password.
        {"redis://S3CRETpw@127.0.0.1:6379", "\"redis://***@127.0.0.1:6379\": user info without a ':'"},
        {"redis://S3%43RETpw@127.0.0.1:6379", "\"redis://***@127.0.0.1:6379\""},
        {"default:S3CRETpw@127.0.0.1:6379", "\"default:***@127.0.0.1:6379\": missing scheme"},
        // The empty-URI message used to quote the whole list.
        {"redis://127.0.0.1:1,,redis://:S3CRETpw@127.0.0.1:2", "--nodes: node URI 2 of 3 is empty"},
        // A raw ',' in a password splits the URI inside it.
        {"redis://:S3CR,ETpw@127.0.0.1:6379", "--nodes: node URI 1 is cut short by a ','"},
        {"redis://u:S3CR,E,Tpw@127.0.0.1:6379", "--nodes: node URI 1 is cut short by a ','"},
    };
    for (const auto& c : cases) {
      for (const std::string command : {"ping", "status"}) {
        std::vector<std::string> args{command, "--nodes", c.nodes};
        if (command == "status") args.push_back("cli-secrets");
        auto o = run_cli(args, dir.path(), 5s);
        INFO(c.nodes);
        INFO(show(o));
        CHECK(o.status == usage_status);
        CHECK(contains(o.err, c.message));
        for (const char* piece : {"S3CR", "CRET", "ETpw", "%43"}) CHECK_FALSE(contains(o.err + o.out, piece));
      }
    }
  }

  TEST_CASE("cli: a user name with an empty password is refused without showing it") {
    temp_dir dir;
    // Accepted by the URI parser, refused when the lock's Redsync checks it.
    auto o = run_cli(
        {"lock", "--nodes", "redis://S3CRETpw:@127.0.0.1:1", "--wait", "0", "cli-secrets", "--", "true"},
        dir.path(), 5s);
    INFO(show(o));
    CHECK(o.status == usage_status);
    CHECK(contains(o.err, "username = (not shown: it may be a password)"));
    CHECK_FALSE(contains(o.err + o.out, "S3CRETpw"));
  }
}  // TEST_SUITE
