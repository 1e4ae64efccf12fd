// The function libraries of script_mode::functions are generated from the
// scripts' own sources (lib/redlock/function_library.hpp); the FCALL and
// EVAL forms are derived from the EVALSHA encoding (script_call.hpp).

#include <doctest/doctest.h>

#include "redlock/function_library.hpp"
#include "redlock/scripts.hpp"

#include <string>

using namespace redsync::detail;

TEST_SUITE_BEGIN("function_library");

TEST_CASE("a script's library is named after its SHA1 and wraps its source as the function body") {
  const lua_script& s = release_script();
  CHECK(function_name(s) == "redsync_" + s.sha1);
  const std::string lib = function_library(s);
  CHECK(lib.starts_with("#!lua name=redsync_" + s.sha1 + "\n"));
  CHECK(lib.find("function_name='redsync_" + s.sha1 + "'") != std::string::npos);
  CHECK(lib.find("callback=function(KEYS, ARGV)\n") != std::string::npos);
  CHECK(lib.find(std::string(s.source)) != std::string::npos);
  CHECK(lib.find("flags={}") != std::string::npos);
  CHECK(lib.ends_with("\nend}\n"));
}

TEST_CASE("only the read-only check script is flagged no-writes") {
  CHECK(function_library(check_script()).find("flags={'no-writes'}") != std::string::npos);
  for (const lua_script* s : {&acquire_script(), &leave_script(), &fence_script(), &record_read_script(),
                              &record_stamp_script(), &release_script(), &extend_script()}) {
    CHECK(function_library(*s).find("no-writes") == std::string::npos);
  }
}

TEST_CASE("different scripts get different libraries and function names") {
  CHECK(function_name(acquire_script()) != function_name(release_script()));
  CHECK(function_name(extend_script()) != function_name(check_script()));
}

TEST_CASE("the FCALL and EVAL forms keep the keys and arguments of the EVALSHA call") {
  const lua_script& s = extend_script();
  const auto call = make_script_call(s, {"k1", "k2"}, {"v", "8000", "0"});
  const std::string tail = "$1\r\n2\r\n$2\r\nk1\r\n$2\r\nk2\r\n$1\r\nv\r\n$4\r\n8000\r\n$1\r\n0\r\n";
  CHECK(*call.evalsha == "*8\r\n$7\r\nEVALSHA\r\n$40\r\n" + s.sha1 + "\r\n" + tail);
  const std::string name = function_name(s);
  CHECK(*to_fcall(call) ==
        "*8\r\n$5\r\nFCALL\r\n$" + std::to_string(name.size()) + "\r\n" + name + "\r\n" + tail);
  CHECK(*to_eval(call) == "*8\r\n$4\r\nEVAL\r\n$" + std::to_string(s.source.size()) + "\r\n" +
                              std::string(s.source) + "\r\n" + tail);
}

TEST_SUITE_END();
