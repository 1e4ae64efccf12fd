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

  TEST_CASE("cli: a TLS node that fails verification is down with OpenSSL's reason, unless --tls-insecure") {
    test_ca ca;
    test_ca other("another test CA");
    cluster nodes(3, tls_config(ca));
    temp_dir dir;
    auto wrong = run_cli({"ping", tls_nodes_arg(nodes), "--tls-ca", other.ca_file()}, dir.path(), 20s);
    INFO(show(wrong));
    CHECK(wrong.status == unavailable_status);
    CHECK(
        contains(wrong.out, "127.0.0.1:" + std::to_string(nodes[0].tls_port()) + ": down (TLS handshake: "));
    CHECK(contains(wrong.out, "certificate verify failed"));

    auto name = run_cli(
        {"ping", tls_nodes_arg(nodes), "--tls-ca", ca.ca_file(), "--tls-server-name", "wrong.example"},
        dir.path(), 20s);
    INFO(show(name));
    CHECK(name.status == unavailable_status);
    CHECK(contains(name.out, "hostname mismatch"));

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
}
