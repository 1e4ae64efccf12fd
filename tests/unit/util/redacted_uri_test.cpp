#include "util/redacted_uri.hpp"
#include "node_uri_error.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <doctest/doctest.h>

#include <string>
#include <string_view>

using redsync::config_error;
using redsync::node_options;
using redsync::detail::redacted_uri;
using redsync::test::node_uri_error;

// Issue 26: every form that may carry a password is masked in what error
// messages show, whatever its case or percent-encoding, and user info that
// may be a password is never echoed. Each case holds the secret "S3CRETpw"
// (or a spelling of it) and checks both the masked URI and that no piece of
// the secret is left in the message.

namespace {

// The whole URI as error messages show it, as the parser reads it.
std::string shown(std::string_view uri) {
  const bool to_last_at = uri.starts_with("redis://") || uri.starts_with("rediss://");
  return redacted_uri(uri, to_last_at).shown(uri);
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace

TEST_CASE("a password query parameter is masked whatever the case of its name") {
  for (const std::string_view name : {"password", "Password", "PASSWORD", "pAsSwOrD"}) {
    CAPTURE(name);
    const std::string uri = "rediss://h:6380?" + std::string(name) + "=S3CRETpw&ca=/ca.pem";
    CHECK(shown(uri) == "rediss://h:6380?" + std::string(name) + "=***&ca=/ca.pem");
    const std::string m = node_uri_error(uri);
    CHECK_FALSE(contains(m, "S3CRETpw"));
    CHECK(contains(m, "\"rediss://h:6380?" + std::string(name) + "=***&ca=/ca.pem\""));
  }
}

TEST_CASE("a password query parameter is masked when its name or '=' is percent-encoded") {
  CHECK(shown("rediss://h?%50assword=S3CRETpw") == "rediss://h?%50assword=***");
  CHECK(shown("rediss://h?pass%77ord=S3CRETpw&x=1") == "rediss://h?pass%77ord=***&x=1");
  CHECK(shown("rediss://h?PASS%57ORD=S3CRETpw") == "rediss://h?PASS%57ORD=***");
  CHECK(shown("rediss://h?password%3DS3CRETpw") == "rediss://h?password%3D***");
  CHECK_FALSE(contains(node_uri_error("rediss://h?%70assword=S3CRETpw"), "S3CRETpw"));
  // The value ends at the next raw '&' only: "%26" is part of it.
  CHECK(shown("rediss://h?password=S3%26CRETpw&x=1") == "rediss://h?password=***&x=1");
}

TEST_CASE("other names clients use for a password parameter are masked too") {
  for (const std::string_view name : {"pass", "passwd", "pwd", "auth", "auth_pass", "secret", "token"}) {
    CAPTURE(name);
    const std::string uri = "rediss://h?" + std::string(name) + "=S3CRETpw";
    CHECK(shown(uri) == "rediss://h?" + std::string(name) + "=***");
    CHECK_FALSE(contains(node_uri_error(uri), "S3CRETpw"));
  }
}

TEST_CASE("a password parameter is masked in the path and the fragment too, not only in the query") {
  const std::string path = node_uri_error("redis://h/password=S3CRETpw");
  CHECK_FALSE(contains(path, "S3CRETpw"));
  CHECK(contains(path, "\"redis://h/password=***\""));
  const std::string fragment = node_uri_error("redis://h#Password=S3CRETpw");
  CHECK_FALSE(contains(fragment, "S3CRETpw"));
  CHECK(contains(fragment, "unexpected \"#Password=***\""));
}

TEST_CASE("a password parameter is masked where the redaction reads user info but the parser does not") {
  // Found by tests/fuzz/uri_fuzz.cpp: "?password=" before the '@' was taken
  // for a user name and shown.
  const std::string m = node_uri_error("unix:x://h?password=S3CRETpw:u@y");
  CHECK_FALSE(contains(m, "S3CRETpw"));
  CHECK(contains(m, "\"unix:x://h?password=***\""));
}

TEST_CASE("a password that spells a parameter is masked as any other, and the host after it is shown") {
  // Found by tests/fuzz/uri_fuzz.cpp: the "password=" inside the password
  // extended the mask over the host, so what was shown depended on the
  // password's letters.
  CHECK(shown("redis://u:a&password=S3CRETpw@h:99999") == "redis://u:***@h:99999");
  CHECK(shown("redis://u:a&password=S3CRETpw@h?db=1&x") == "redis://u:***@h?db=1&x");
}

TEST_CASE("lone user info is masked whole and never named: other clients read it as a password") {
  for (const std::string_view scheme : {"redis://", "rediss://", "REDIS://"}) {
    CAPTURE(scheme);
    const std::string m = node_uri_error(std::string(scheme) + "S3CRETpw@h");
    CHECK_FALSE(contains(m, "S3CRETpw"));
    CHECK(contains(m, "\"" + std::string(scheme) + "***@h\""));
    CHECK(contains(m, "redis://:password@host"));
  }
  // Percent-encoded or badly encoded, no piece of it shows either.
  const std::string encoded = node_uri_error("redis://S3%43RETpw@h");
  CHECK_FALSE(contains(encoded, "S3"));
  CHECK_FALSE(contains(encoded, "RETpw"));
  const std::string bad = node_uri_error("redis://S3%zzRETpw@h");
  CHECK_FALSE(contains(bad, "S3"));
  CHECK_FALSE(contains(bad, "%zz"));
  CHECK_FALSE(contains(bad, "RETpw"));
  // unix:// takes no user info at all, and still must not show it.
  const std::string unix_uri = node_uri_error("unix://S3CRETpw@/tmp/r.sock");
  CHECK_FALSE(contains(unix_uri, "S3CRETpw"));
  CHECK(contains(unix_uri, "\"unix://***@/tmp/r.sock\""));
}

TEST_CASE("a user name followed by an empty password is masked: it may be the password") {
  const std::string m = node_uri_error("redis://S3CRETpw:@h:99999");
  CHECK_FALSE(contains(m, "S3CRETpw"));
  CHECK(contains(m, "\"redis://***:@h:99999\""));
  CHECK_FALSE(contains(node_uri_error("redis://S3%zzRETpw:@h"), "%zz"));
  // With a password after it, the user name is no secret and is shown.
  CHECK(shown("redis://alice:S3CRETpw@h") == "redis://alice:***@h");
  CHECK(contains(node_uri_error("redis://al%zzice:pw@h"), "bad percent-encoding \"%zz\" in user name"));
}

TEST_CASE("user info in a URI that lacks its scheme is masked") {
  const std::string m = node_uri_error("default:S3CRETpw@10.0.0.1:6379");
  CHECK_FALSE(contains(m, "S3CRETpw"));
  CHECK(contains(m, "\"default:***@10.0.0.1:6379\": missing scheme"));
  const std::string lone = node_uri_error("S3CRETpw@10.0.0.1:6379");
  CHECK_FALSE(contains(lone, "S3CRETpw"));
  CHECK(contains(lone, "\"***@10.0.0.1:6379\": missing scheme"));
  const std::string one_slash = node_uri_error("redis:/:S3CRETpw@h");
  CHECK_FALSE(contains(one_slash, "S3CRETpw"));
}

TEST_CASE("parts without a secret are shown as written") {
  CHECK(shown("rediss://h:6380/0?ca=/etc/ca.pem&key=/k.pem") ==
        "rediss://h:6380/0?ca=/etc/ca.pem&key=/k.pem");
  CHECK(shown("unix:///tmp/r.sock?db=1") == "unix:///tmp/r.sock?db=1");
  CHECK(shown("redis://:@h") == "redis://:@h");
  CHECK(shown("localhost:6379") == "localhost:6379");
}
