// The tool over TLS: rediss:// nodes, the --tls-* options (which reach the
// command through REDSYNC_NODES), OpenSSL's reasons in the per-node output,
// and the usage errors of the TLS options.
#include <doctest/doctest.h>

#include "cli_helpers.hpp"
#include "test_ca.hpp"

using namespace redsync::test;

namespace {

config tls_config(test_ca& ca) {
  const issued_cert cert = ca.issue();
  return config{.tls = tls_server_config{cert.cert_file, cert.key_file, ca.ca_file(), false}};
}

// --nodes=rediss://127.0.0.1:P1,... without any TLS parameter.
std::string tls_nodes_arg(const cluster& c) {
  std::string list;
  for (std::size_t i = 0; i < c.size(); ++i) list += (list.empty() ? "" : ",") + c[i].tls_uri();
  return "--nodes=" + list;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE(
      "cli: lock runs its command over rediss:// nodes, and REDSYNC_NODES carries --tls-ca to the command") {
    test_ca ca;
    cluster nodes(3, tls_config(ca));
    temp_dir dir;
    // A nested `redsync ping` without --nodes reads REDSYNC_NODES.
    const std::string script = "printf '%s' \"$REDSYNC_NODES\" > nodes.txt; \"$1\" ping > ping.txt";
    auto o = run_cli({"lock", tls_nodes_arg(nodes), "--tls-ca", ca.ca_file(), "cli-tls", "--", "sh", "-c",
                      script, "sh", cli_path()},
                     dir.path(), 20s);
    INFO(show(o));
    CHECK(o.status == 0);
    const std::string env_nodes = read_file(dir.file("nodes.txt")).value_or("");
    CHECK(contains(env_nodes, nodes[0].tls_uri("?ca=" + ca.ca_file())));
    const std::string ping = read_file(dir.file("ping.txt")).value_or("");
    INFO(ping);
    CHECK(contains(ping, "3/3 nodes up"));
    CHECK(nodes_holding(nodes, "cli-tls") == 0);  // released
  }

  TEST_CASE(
      "cli: a TLS node that fails verification is down with OpenSSL's reason and a hint, unless "
      "--tls-insecure") {
    test_ca ca;
    test_ca other("another test CA");
    cluster nodes(3, tls_config(ca));
    temp_dir dir;
    auto wrong = run_cli({"ping", tls_nodes_arg(nodes), "--tls-ca", other.ca_file()}, dir.path(), 20s);
    INFO(show(wrong));
    // No retry fixes it: refused, as for a wrong password.
    CHECK(wrong.status == refused_status);
    CHECK(
        contains(wrong.out, "127.0.0.1:" + std::to_string(nodes[0].tls_port()) + ": down (TLS handshake: "));
    CHECK(contains(wrong.out, "certificate verify failed"));
    CHECK(contains(wrong.out, "use --tls-ca FILE"));

    auto name = run_cli(
        {"ping", tls_nodes_arg(nodes), "--tls-ca", ca.ca_file(), "--tls-server-name", "wrong.example"},
        dir.path(), 20s);
    INFO(show(name));
    CHECK(name.status == refused_status);
    // The same words as lock's: the name that was expected.
    CHECK(contains(name.out, "hostname mismatch (expected \"wrong.example\")"));
    CHECK(contains(name.out, "use --tls-server-name NAME"));

    auto insecure = run_cli({"ping", tls_nodes_arg(nodes), "--tls-ca", other.ca_file(), "--tls-insecure"},
                            dir.path(), 20s);
    INFO(show(insecure));
    CHECK(insecure.status == 0);
    CHECK(contains(insecure.out, "3/3 nodes up"));
  }

  TEST_CASE("cli: TLS options without a rediss:// node, and unknown rediss:// parameters, are usage errors") {
    temp_dir dir;
    auto plain = run_cli({"ping", "--nodes=redis://127.0.0.1:7001", "--tls-ca", "/ca.pem"}, dir.path(), 10s);
    INFO(show(plain));
    CHECK(plain.status == usage_status);
    CHECK(contains(plain.err, "--tls-ca: no node uses rediss://"));

    auto unknown = run_cli({"ping", "--nodes=rediss://127.0.0.1:7001?sni=x"}, dir.path(), 10s);
    INFO(show(unknown));
    CHECK(unknown.status == usage_status);
    CHECK(contains(unknown.err, "unknown query parameter \"sni\""));

    auto missing = run_cli({"ping", "--nodes=rediss://127.0.0.1:7001", "--tls-ca", dir.file("missing.pem")},
                           dir.path(), 10s);
    INFO(show(missing));
    CHECK(missing.status == usage_status);
    CHECK(contains(missing.err,
                   "--tls-ca (ca=): \"" + dir.file("missing.pem") + "\" cannot be read: No such file"));

    // A URI that already sets the parameter (inherited through
    // REDSYNC_NODES, say) is never overridden in silence.
    auto conflict =
        run_cli({"ping", "--nodes=rediss://127.0.0.1:7001?ca=/a.pem", "--tls-ca", "/b.pem"}, dir.path(), 10s);
    INFO(show(conflict));
    CHECK(conflict.status == usage_status);
    CHECK(contains(conflict.err,
                   "--tls-ca \"/b.pem\" conflicts with ca=/a.pem in the URI of node 127.0.0.1:7001"));
    auto insecure =
        run_cli({"ping", "--nodes=rediss://127.0.0.1:7001?insecure=true", "--tls-insecure"}, dir.path(), 10s);
    INFO(show(insecure));
    CHECK(insecure.status != usage_status);  // the same setting twice is no conflict
  }

  TEST_CASE(
      "cli: lock gives up on a certificate that fails verification as on a wrong password, with a hint") {
    test_ca ca;
    test_ca other("another test CA");
    cluster nodes(3, tls_config(ca));
    temp_dir dir;
    // Without --wait: it used to retry forever.
    auto wrong = run_cli(
        {"lock", tls_nodes_arg(nodes), "--tls-ca", other.ca_file(), "cli-tls-wrong-ca", "--", "touch", "ran"},
        dir.path(), 30s);
    INFO(show(wrong));
    CHECK(wrong.status == refused_status);
    CHECK(wrong.elapsed < 15s);
    CHECK(contains(wrong.err, "3/3 nodes refuse: "));
    CHECK(contains(wrong.err, "certificate verify failed"));
    CHECK(contains(wrong.err, "use --tls-ca FILE"));
    CHECK(contains(wrong.err, "retrying cannot fix it"));
    CHECK_FALSE(read_file(dir.file("ran")).has_value());

    auto name = run_cli({"lock", "--wait=60s", tls_nodes_arg(nodes), "--tls-ca", ca.ca_file(),
                         "--tls-server-name", "wrong.example", "cli-tls-wrong-name", "--", "true"},
                        dir.path(), 30s);
    INFO(show(name));
    CHECK(name.status == refused_status);
    CHECK(name.elapsed < 15s);
    CHECK(contains(name.err, "hostname mismatch (expected \"wrong.example\")"));
    CHECK(contains(name.err, "use --tls-server-name NAME"));
  }

  TEST_CASE("cli: an expired server certificate stops lock and ping at once, saying so") {
    test_ca ca;
    const issued_cert expired = ca.issue(
        {.name = "expired", .not_before = std::chrono::hours{-48}, .not_after = std::chrono::hours{-24}});
    cluster nodes(3,
                  config{.tls = tls_server_config{expired.cert_file, expired.key_file, ca.ca_file(), false}});
    temp_dir dir;
    auto lock =
        run_cli({"lock", tls_nodes_arg(nodes), "--tls-ca", ca.ca_file(), "cli-tls-expired", "--", "true"},
                dir.path(), 30s);
    INFO(show(lock));
    CHECK(lock.status == refused_status);
    CHECK(lock.elapsed < 15s);
    CHECK(contains(lock.err, "certificate has expired"));
    CHECK(contains(lock.err, "renew it"));
    auto ping = run_cli({"ping", tls_nodes_arg(nodes), "--tls-ca", ca.ca_file()}, dir.path(), 20s);
    INFO(show(ping));
    CHECK(ping.status == refused_status);
    CHECK(contains(ping.out, "certificate has expired"));
  }

  TEST_CASE("cli: redis:// to a TLS port says that the port speaks TLS, and lock stops") {
    test_ca ca;
    cluster nodes(3, tls_config(ca));
    temp_dir dir;
    std::string list;
    for (std::size_t i = 0; i < nodes.size(); ++i)
      list +=
          (list.empty() ? "" : ",") + std::string("redis://127.0.0.1:") + std::to_string(nodes[i].tls_port());
    const std::string expected =
        "the port speaks TLS: use rediss://127.0.0.1:" + std::to_string(nodes[0].tls_port());
    auto ping = run_cli({"ping", "--nodes=" + list}, dir.path(), 20s);
    INFO(show(ping));
    CHECK(ping.status == refused_status);
    CHECK(contains(ping.out, expected));
    auto lock = run_cli({"lock", "--nodes=" + list, "cli-plain-to-tls", "--", "true"}, dir.path(), 30s);
    INFO(show(lock));
    CHECK(lock.status == refused_status);
    CHECK(lock.elapsed < 15s);
    CHECK(contains(lock.err, expected));
  }

  TEST_CASE("cli: --tls-ca-dir reads every file of the directory, for lock, ping and status alike") {
    test_ca ca;
    cluster nodes(3, tls_config(ca));
    temp_dir dir;
    temp_dir cas;
    // No hashed name (no `openssl rehash`): just a file.
    {
      const std::string pem = read_file(ca.ca_file()).value_or("");
      REQUIRE_FALSE(pem.empty());
      std::FILE* f = std::fopen(cas.file("our-ca.pem").c_str(), "w");
      REQUIRE(f != nullptr);
      std::fwrite(pem.data(), 1, pem.size(), f);
      std::fclose(f);
    }
    auto ping = run_cli({"ping", tls_nodes_arg(nodes), "--tls-ca-dir", cas.path()}, dir.path(), 20s);
    INFO(show(ping));
    CHECK(ping.status == 0);
    CHECK(contains(ping.out, "3/3 nodes up"));
    auto status =
        run_cli({"status", tls_nodes_arg(nodes), "--tls-ca-dir", cas.path(), "cli-tls-dir"}, dir.path(), 20s);
    INFO(show(status));
    CHECK(status.status == 0);
    auto lock =
        run_cli({"lock", tls_nodes_arg(nodes), "--tls-ca-dir", cas.path(), "cli-tls-dir", "--", "true"},
                dir.path(), 20s);
    INFO(show(lock));
    CHECK(lock.status == 0);
  }

  TEST_CASE("cli: a relative --tls-ca reaches the command's REDSYNC_NODES as an absolute path") {
    test_ca ca;
    cluster nodes(3, tls_config(ca));
    temp_dir dir;
    {
      const std::string pem = read_file(ca.ca_file()).value_or("");
      std::FILE* f = std::fopen(dir.file("ca.pem").c_str(), "w");
      REQUIRE(f != nullptr);
      std::fwrite(pem.data(), 1, pem.size(), f);
      std::fclose(f);
    }
    // The command runs ping from another directory, with REDSYNC_NODES only.
    const std::string script =
        "printf '%s' \"$REDSYNC_NODES\" > nodes.txt; out=$PWD; cd / && \"$1\" ping > \"$out/ping.txt\"";
    auto o = run_cli({"lock", tls_nodes_arg(nodes), "--tls-ca", "ca.pem", "cli-tls-relative", "--", "sh",
                      "-c", script, "sh", cli_path()},
                     dir.path(), 20s);
    INFO(show(o));
    CHECK(o.status == 0);
    const std::string env_nodes = read_file(dir.file("nodes.txt")).value_or("");
    INFO(env_nodes);
    CHECK(contains(env_nodes, "?ca=/"));
    CHECK(contains(env_nodes, "/ca.pem"));
    CHECK_FALSE(contains(env_nodes, "?ca=ca.pem"));
    CHECK(contains(read_file(dir.file("ping.txt")).value_or(""), "3/3 nodes up"));
  }
}
