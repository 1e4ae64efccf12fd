// The function libraries of script_mode::functions are generated from the
// scripts' own sources (lib/redlock/scripts/function_library.hpp); the FCALL and
// EVAL forms are derived from the EVALSHA encoding (script_call.hpp).

#include <doctest/doctest.h>

#include "redlock/scripts/function_library.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "util/sha1.hpp"

#include <string>

using namespace redsync::detail;

TEST_SUITE_BEGIN("function_library");

TEST_CASE("a script's library is named after the SHA1 of its flags and source, and wraps the source") {
  const lua_script& s = acquire_script();
  const std::string name = "redsync_" + sha1_hex("flags={}\n" + std::string(s.source));
  CHECK(function_name(s) == name);
  const std::string lib = function_library(s);
  CHECK(lib.starts_with("#!lua name=" + name + "\n"));
  CHECK(lib.find("function_name='" + name + "'") != std::string::npos);
  CHECK(lib.find("callback=function(KEYS, ARGV)\n") != std::string::npos);
  CHECK(lib.find(std::string(s.source)) != std::string::npos);
  CHECK(lib.find("flags={}") != std::string::npos);
  CHECK(lib.ends_with("\nend}\n"));
  // The flags are part of what is hashed: a flag change is a new library.
  CHECK(function_name(release_script()) ==
        "redsync_" + sha1_hex("flags={'allow-oom'}\n" + std::string(release_script().source)));
}

TEST_CASE(
    "the check script is flagged no-writes; the holders' release, leave and extend allow-oom; the rest "
    "none") {
  CHECK(function_library(check_script()).find("flags={'no-writes'}") != std::string::npos);
  for (const lua_script* s : {&release_script(), &leave_script(), &extend_script(),
                              &semaphore_release_script(), &semaphore_extend_script()})
    CHECK(function_library(*s).find("flags={'allow-oom'}") != std::string::npos);
  for (const lua_script* s : {&acquire_script(), &fence_script(), &record_read_script(),
                              &record_stamp_script(), &semaphore_acquire_script(), &semaphore_fence_script()})
    CHECK(function_library(*s).find("flags={}") != std::string::npos);
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
