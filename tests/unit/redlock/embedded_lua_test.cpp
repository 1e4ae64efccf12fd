// The scripts' texts and SHA1s come from the build (lib/redlock/scripts/
// embed_lua.py, from lua/*.lua); here, once, each SHA1 is checked against
// the SHA-1 of its text, so that the generator and the library agree on
// what EVALSHA names (tests/redis/redlock/scripts_test.cpp checks the same
// against SCRIPT LOAD).

#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "util/sha1.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

using namespace redsync::detail;

TEST_SUITE_BEGIN("embedded_lua");

TEST_CASE("every script's SHA1, each variant's too, is the SHA1 of its text") {
  const std::vector<std::pair<const char*, const lua_script*>> scripts = {
      {"acquire", &acquire_script()},
      {"leave", &leave_script()},
      {"release", &release_script()},
      {"extend", &extend_script()},
      {"check", &check_script()},
      {"fence", &fence_script()},
      {"record_read", &record_read_script()},
      {"record_stamp", &record_stamp_script()},
      {"semaphore_acquire", &semaphore_acquire_script()},
      {"semaphore_acquire_count_only", &semaphore_acquire_count_only_script()},
      {"semaphore_release", &semaphore_release_script()},
      {"semaphore_extend", &semaphore_extend_script()},
      {"semaphore_fence", &semaphore_fence_script()},
  };
  int checked = 0;
  for (const auto& entry : scripts) {
    // Not a structured binding: clang 14 cannot capture one (CAPTURE is a lambda).
    const lua_script* script = entry.second;
    CAPTURE(entry.first);
    CHECK(script->sha1.size() == 40);
    CHECK(script->sha1 == sha1_hex(script->source));
    ++checked;
    if (script->cluster == nullptr) continue;
    CHECK(script->cluster->cluster == nullptr);
    CHECK(script->cluster->sha1 == sha1_hex(script->cluster->source));
    CHECK(script->cluster->sha1 != script->sha1);
    ++checked;
  }
  CHECK(checked == 19);  // every script embed_lua.py composes
}

TEST_SUITE_END();
