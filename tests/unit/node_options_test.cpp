#include "node_uri_error.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <doctest/doctest.h>

#include <string>
#include <string_view>

using redsync::config_error;
using redsync::node_options;
using redsync::test::node_uri_error;

// ---- redis://
// ------------------------------------------------------------------

TEST_CASE("a bare host gets the default port, db 0 and no credentials") {
  const node_options n = node_options::parse("redis://cache.local");
  CHECK(n.host == "cache.local");
  CHECK(n.port == 6379);
  CHECK(n.db == 0);
  CHECK(n.username.empty());
  CHECK(n.password.empty());
  CHECK(n.unix_path.empty());
}

TEST_CASE("host, port and db are all parsed") {
  const node_options n = node_options::parse("redis://10.0.0.7:7001/3");
  CHECK(n.host == "10.0.0.7");
  CHECK(n.port == 7001);
  CHECK(n.db == 3);
}

TEST_CASE("an empty path or a lone slash means db 0") {
  CHECK(node_options::parse("redis://h:6380").db == 0);
  CHECK(node_options::parse("redis://h:6380/").db == 0);
  CHECK(node_options::parse("redis://h/").db == 0);
  CHECK(node_options::parse("redis://h/0").db == 0);
}

TEST_CASE("port and db boundaries are accepted") {
  CHECK(node_options::parse("redis://h:1").port == 1);
  CHECK(node_options::parse("redis://h:65535").port == 65535);
  CHECK(node_options::parse("redis://h/2147483647").db == 2147483647);
}

TEST_CASE("user and password are parsed and percent-decoded") {
  const node_options n = node_options::parse("redis://app%40corp:p%3Ass%2Fw%25rd@h:7000/1");
  CHECK(n.username == "app@corp");
  CHECK(n.password == "p:ss/w%rd");
  CHECK(n.host == "h");
  CHECK(n.port == 7000);
  CHECK(n.db == 1);
}

TEST_CASE("a colon before the @ with no user gives a password only") {
  const node_options n = node_options::parse("redis://:s3cret@h");
  CHECK(n.username.empty());
  CHECK(n.password == "s3cret");
  CHECK(n.host == "h");
}

TEST_CASE("a password may contain unencoded ':' '@' '/' characters") {
  const node_options n = node_options::parse("redis://u:a:b@c/d@h:7002");
  CHECK(n.username == "u");
  CHECK(n.password == "a:b@c/d");
  CHECK(n.host == "h");
  CHECK(n.port == 7002);
}

TEST_CASE("an IPv6 host is written in brackets") {
  const node_options n = node_options::parse("redis://[::1]:7001");
  CHECK(n.host == "::1");
  CHECK(n.port == 7001);
  const node_options m = node_options::parse("redis://:pw@[2001:db8::a]/2");
  CHECK(m.host == "2001:db8::a");
  CHECK(m.port == 6379);
  CHECK(m.db == 2);
  CHECK(m.password == "pw");
}

TEST_CASE("the scheme is case-insensitive") {
  CHECK(node_options::parse("REDIS://h:7003").port == 7003);
}

// ---- unix:
// ---------------------------------------------------------------------

TEST_CASE("a unix URI gives the socket path and db 0") {
  const node_options n = node_options::parse("unix:///var/run/redis/redis.sock");
  CHECK(n.unix_path == "/var/run/redis/redis.sock");
  CHECK(n.db == 0);
  CHECK(n.host.empty());
}

TEST_CASE("a unix URI takes the db from its query") {
  const node_options n = node_options::parse("unix:///tmp/r.sock?db=5");
  CHECK(n.unix_path == "/tmp/r.sock");
  CHECK(n.db == 5);
}

TEST_CASE("a unix URI in the short form printed by address() parses back") {
  const node_options n = node_options::parse("unix:/tmp/r.sock");
  CHECK(n.unix_path == "/tmp/r.sock");
  CHECK(node_options::parse(n.address()).unix_path == "/tmp/r.sock");
}

TEST_CASE("a unix socket path is percent-decoded") {
  CHECK(node_options::parse("unix:///tmp/my%20redis.sock").unix_path == "/tmp/my redis.sock");
}

// ---- address()
// -----------------------------------------------------------------

TEST_CASE("address() is host:port, bracketed for IPv6, or unix:/path") {
  CHECK(node_options::parse("redis://h:7001").address() == "h:7001");
  CHECK(node_options::parse("redis://[::1]:7001").address() == "[::1]:7001");
  CHECK(node_options::parse("unix:///tmp/r.sock").address() == "unix:/tmp/r.sock");
  CHECK(node_options{}.address() == "127.0.0.1:6379");
}

TEST_CASE("address() of a parsed URI parses back to the same host and port") {
  for (const char* uri : {"redis://h:7001", "redis://[::1]:7001", "redis://[fe80::1]"}) {
    CAPTURE(uri);
    const node_options a = node_options::parse(uri);
    const node_options b = node_options::parse("redis://" + a.address());
    CHECK(b.host == a.host);
    CHECK(b.port == a.port);
  }
}

// ---- errors
// --------------------------------------------------------------------

TEST_CASE("errors name the URI and the problem") {
  CHECK_THROWS_WITH_AS(node_options::parse("redis://h:99999"),
                       "invalid node URI \"redis://h:99999\": port 99999 is out of range "
                       "1..65535",
                       config_error);
}

TEST_CASE("an empty URI is rejected") {
  CHECK(node_uri_error("").find("empty") != std::string::npos);
}

TEST_CASE("a URI without a scheme is rejected") {
  const std::string m = node_uri_error("localhost:6379");
  CHECK(m.find("\"localhost:6379\"") != std::string::npos);
  CHECK(m.find("missing scheme") != std::string::npos);
  CHECK(node_uri_error("10.0.0.1").find("missing scheme") != std::string::npos);
}

TEST_CASE("an unknown scheme is rejected and named") {
  CHECK(node_uri_error("http://h:6379").find("unknown scheme \"http\"") != std::string::npos);
  CHECK(node_uri_error("valkey://h").find("unknown scheme \"valkey\"") != std::string::npos);
}

// ---- rediss://
// ------------------------------------------------------------------

TEST_CASE("rediss:// turns TLS on and verifies against the system store and the host by default") {
  const node_options n = node_options::parse("rediss://:pw@cache.example:6380/2");
  CHECK(n.tls.enabled);
  CHECK(n.host == "cache.example");
  CHECK(n.port == 6380);
  CHECK(n.db == 2);
  CHECK(n.password == "pw");
  CHECK(n.tls.ca_file.empty());
  CHECK(n.tls.ca_dir.empty());
  CHECK(n.tls.cert_file.empty());
  CHECK(n.tls.key_file.empty());
  CHECK(n.tls.server_name.empty());
  CHECK_FALSE(n.tls.insecure_skip_verify);
  CHECK_FALSE(node_options::parse("redis://cache.example").tls.enabled);
  CHECK(node_options::parse("REDISS://h").tls.enabled);
}

TEST_CASE("rediss:// query parameters set every TLS field, percent-decoded") {
  const node_options n = node_options::parse(
      "rediss://u:p%40ss@10.0.0.7:6380/1?ca=/etc/ca%20dir/ca.pem&ca_dir=/etc/ssl/certs&cert=/c.pem&key=/"
      "k%40x."
      "pem&server_name=redis.internal&insecure=false");
  CHECK(n.username == "u");
  CHECK(n.password == "p@ss");
  CHECK(n.host == "10.0.0.7");
  CHECK(n.db == 1);
  CHECK(n.tls.ca_file == "/etc/ca dir/ca.pem");
  CHECK(n.tls.ca_dir == "/etc/ssl/certs");
  CHECK(n.tls.cert_file == "/c.pem");
  CHECK(n.tls.key_file == "/k@x.pem");
  CHECK(n.tls.server_name == "redis.internal");
  CHECK_FALSE(n.tls.insecure_skip_verify);
  CHECK(node_options::parse("rediss://h?insecure=true").tls.insecure_skip_verify);
  CHECK(node_options::parse("rediss://h:1?insecure=1").tls.insecure_skip_verify);
}

TEST_CASE("a raw '@' in a rediss:// parameter value is rejected, naming the parameter and %40") {
  const std::string m = node_uri_error("rediss://redis.internal:6380?ca=/etc/ca@v2.pem");
  CHECK_MESSAGE(
      m.find("an '@' in the value of the parameter \"ca\" must be written %40") != std::string::npos, m);
  CHECK(node_uri_error("rediss://h?server_name=a@b").find("\"server_name\"") != std::string::npos);
  // A password may still hold a raw '?' that is no parameter.
  CHECK(node_options::parse("rediss://u:p?x@h:6380").password == "p?x");
}

TEST_CASE("an unknown rediss:// query parameter is rejected and named") {
  const std::string m = node_uri_error("rediss://h:6380?ca=/ca.pem&sni=x");
  CHECK(m.find("unknown query parameter \"sni\"") != std::string::npos);
  CHECK(m.find("ca, ca_dir, cert, key, server_name, insecure") != std::string::npos);
  CHECK(node_uri_error("rediss://h?db=1").find("unknown query parameter \"db\"") != std::string::npos);
}

TEST_CASE("a rediss:// password given as a query parameter is rejected without showing it") {
  const std::string m = node_uri_error("rediss://h?password=hunter2");
  CHECK(m.find("unknown query parameter \"password\"") != std::string::npos);
  CHECK(m.find("hunter2") == std::string::npos);
  CHECK(node_uri_error("rediss://:hunter2@h?bad=1").find("hunter2") == std::string::npos);
}

TEST_CASE("a rediss:// query parameter given twice, without a value or badly encoded is rejected") {
  CHECK(node_uri_error("rediss://h?ca=/a&ca=/b").find("query parameter ca given twice") != std::string::npos);
  CHECK(node_uri_error("rediss://h?ca").find("query parameter ca has no value") != std::string::npos);
  CHECK(node_uri_error("rediss://h?key=").find("query parameter key has no value") != std::string::npos);
  CHECK(node_uri_error("rediss://h?").find("empty query") != std::string::npos);
  CHECK(node_uri_error("rediss://h?ca=/a&").find("empty query parameter") != std::string::npos);
  CHECK(node_uri_error("rediss://h?&ca=/a").find("empty query parameter") != std::string::npos);
  CHECK(node_uri_error("rediss://h?ca=/a%zz").find("bad percent-encoding \"%zz\" in ca") !=
        std::string::npos);
  CHECK(node_uri_error("rediss://h?cert=/a%00b").find("cert contains a NUL byte") != std::string::npos);
  CHECK(node_uri_error("rediss://h?insecure=yes").find("insecure = \"yes\": expected true or false") !=
        std::string::npos);
  CHECK(node_uri_error("rediss://h#frag").find("take no fragment") != std::string::npos);
}

TEST_CASE("a redis:// URI still takes no query: TLS parameters need rediss://") {
  CHECK(node_uri_error("redis://h?ca=/ca.pem").find("redis:// URIs take no query") != std::string::npos);
}

TEST_CASE("an empty host is rejected") {
  CHECK(node_uri_error("redis://").find("empty host") != std::string::npos);
  CHECK(node_uri_error("redis://:6379").find("empty host") != std::string::npos);
  CHECK(node_uri_error("redis://:pw@/0").find("empty host") != std::string::npos);
  CHECK(node_uri_error("redis://[]:6379").find("empty host") != std::string::npos);
}

TEST_CASE("a port that is not a number is rejected and named") {
  CHECK(node_uri_error("redis://h:abc").find("port \"abc\" is not a number") != std::string::npos);
  CHECK(node_uri_error("redis://h:-1").find("port \"-1\"") != std::string::npos);
  CHECK(node_uri_error("redis://h:+80").find("port \"+80\"") != std::string::npos);
  CHECK(node_uri_error("redis://h:").find("port is empty") != std::string::npos);
}

TEST_CASE("a port outside 1..65535 is rejected and named") {
  CHECK(node_uri_error("redis://h:0").find("port 0 is out of range") != std::string::npos);
  CHECK(node_uri_error("redis://h:65536").find("port 65536 is out of range") != std::string::npos);
  CHECK(node_uri_error("redis://h:99999999999999999999999").find("port 99999999999999999999999") !=
        std::string::npos);
}

TEST_CASE("a db that is not a non-negative integer is rejected and named") {
  CHECK(node_uri_error("redis://h/-1").find("db \"-1\" is not a non-negative integer") != std::string::npos);
  CHECK(node_uri_error("redis://h/x").find("db \"x\"") != std::string::npos);
  CHECK(node_uri_error("redis://h/1/2").find("db \"1/2\"") != std::string::npos);
  CHECK(node_uri_error("redis://h/2147483648").find("db 2147483648 is out of range") != std::string::npos);
}

TEST_CASE("trailing garbage is rejected and shown") {
  CHECK(node_uri_error("redis://h:6379?db=1").find("\"?db=1\"") != std::string::npos);
  CHECK(node_uri_error("redis://h#frag").find("\"#frag\"") != std::string::npos);
  CHECK(node_uri_error("redis://[::1]x").find("\"x\" after IPv6") != std::string::npos);
  CHECK(node_uri_error("redis://[::1").find("closing ']'") != std::string::npos);
  CHECK(node_uri_error("redis://h st").find("host \"h st\" contains ' '") != std::string::npos);
}

TEST_CASE("an unbracketed IPv6 address is rejected with a hint") {
  CHECK(node_uri_error("redis://::1:6379").find("empty host") != std::string::npos);
  CHECK(node_uri_error("redis://fe80::1:6379").find("in brackets") != std::string::npos);
}

TEST_CASE("bad percent-encoding is rejected") {
  CHECK(node_uri_error("redis://us%zzer:pw@h").find("bad percent-encoding \"%zz\" in user name") !=
        std::string::npos);
  CHECK(node_uri_error("redis://u:pw%4@h").find("bad percent-encoding in password") != std::string::npos);
  CHECK(node_uri_error("unix:///tmp/a%2").find("bad percent-encoding \"%2\"") != std::string::npos);
}

TEST_CASE("user info without a ':' is rejected with a hint, and not shown: it may be a password") {
  const std::string m = node_uri_error("redis://alice@h");
  CHECK(m.find("alice") == std::string::npos);
  CHECK(m.find("\"redis://***@h\": user info without a ':'") != std::string::npos);
  CHECK(m.find("redis://:password@host") != std::string::npos);
}

TEST_CASE("error messages never show the password") {
  const std::string m = node_uri_error("redis://u:hunter2@h:99999");
  CHECK(m.find("hunter2") == std::string::npos);
  CHECK(m.find("\"redis://u:***@h:99999\"") != std::string::npos);
  CHECK(node_uri_error("redis://:hunter2%zz@h").find("hunter2") == std::string::npos);
  CHECK(node_uri_error("unix://u:hunter2@/tmp/r.sock").find("hunter2") == std::string::npos);
  const std::string q = node_uri_error("unix:///tmp/r.sock?db=1&password=hunter2&x=1");
  CHECK(q.find("hunter2") == std::string::npos);
  CHECK(q.find("\"unix:///tmp/r.sock?db=1&password=***&x=1\"") != std::string::npos);
}

TEST_CASE("an empty unix socket path is rejected") {
  CHECK(node_uri_error("unix://").find("empty unix socket path") != std::string::npos);
  CHECK(node_uri_error("unix:///").find("empty unix socket path") != std::string::npos);
  CHECK(node_uri_error("unix:").find("empty unix socket path") != std::string::npos);
  CHECK(node_uri_error("unix:///?db=1").find("empty unix socket path") != std::string::npos);
}

TEST_CASE("a NUL byte in a unix socket path is rejected, raw or percent-encoded") {
  using namespace std::string_literals;
  CHECK(node_uri_error("unix:///tmp/a%00b.sock").find("NUL byte") != std::string::npos);
  // Found by tests/fuzz/uri_fuzz.cpp: the transport would have connected to /var/run/r.
  const std::string raw = node_uri_error("unix:/Q//var/run/r\0\0\0\0\0\0\0!is.sock"s);
  CHECK(raw.find("NUL byte") != std::string::npos);
  CHECK(raw.find("\"unix:/Q//var/run/r\\x00\\x00\\x00\\x00\\x00\\x00\\x00!is.sock\"") != std::string::npos);
}

TEST_CASE("control characters in a URI are shown escaped in the message") {
  using namespace std::string_literals;
  const std::string m = node_uri_error("redis://ho\nst\x1b[2J\0:1"s);
  CHECK(m.find("\"redis://ho\\x0ast\\x1b[2J\\x00:1\"") != std::string::npos);
  CHECK(m.find("host \"ho\\x0ast\\x1b[2J\\x00\" contains '\\x0a'") != std::string::npos);
}

TEST_CASE("passwords are hidden in every part of the URI an error message shows") {
  // Found by tests/fuzz/uri_fuzz.cpp: the path was shown as written.
  const std::string path = node_uri_error("unix:s://:hunter2!!@localhost/x");
  CHECK(path.find("hunter2") == std::string::npos);
  CHECK(path.find("unix socket path \"s://:***@localhost/x\" is not absolute") != std::string::npos);
  // redis-py reads a password from the query: ours rejects it, unseen.
  const std::string query = node_uri_error("redis://cache:6379?password=hunter2&db=1");
  CHECK(query.find("hunter2") == std::string::npos);
  CHECK(query.find("\"redis://cache:6379?password=***&db=1\"") != std::string::npos);
  CHECK(query.find("unexpected \"?password=***&db=1\"") != std::string::npos);
  const std::string fragment = node_uri_error("unix:///tmp/r.sock#?password=hunter2");
  CHECK(fragment.find("hunter2") == std::string::npos);
  CHECK(node_uri_error("redis://u:hun%zzter2@h").find("hun") == std::string::npos);
}

TEST_CASE("a unix URI with a host or user info is rejected") {
  CHECK(node_uri_error("unix://localhost/tmp/r.sock").find("\"localhost\" before the path") !=
        std::string::npos);
  CHECK(node_uri_error("unix:relative.sock").find("not absolute") != std::string::npos);
}

TEST_CASE("unknown unix query parameters are rejected and named") {
  CHECK(node_uri_error("unix:///tmp/r.sock?password=x").find("unknown query parameter \"password\"") !=
        std::string::npos);
  CHECK(node_uri_error("unix:///tmp/r.sock?db=1&timeout=5").find("\"timeout\"") != std::string::npos);
  CHECK(node_uri_error("unix:///tmp/r.sock?db=1&db=2").find("db given twice") != std::string::npos);
  CHECK(node_uri_error("unix:///tmp/r.sock?db").find("db has no value") != std::string::npos);
  CHECK(node_uri_error("unix:///tmp/r.sock?db=-2").find("db \"-2\"") != std::string::npos);
  CHECK(node_uri_error("unix:///tmp/r.sock#x").find("\"#x\"") != std::string::npos);
}
