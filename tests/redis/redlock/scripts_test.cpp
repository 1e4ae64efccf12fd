// Script ids (lib/util/sha1.cpp, OpenSSL's SHA-1) against a real server:
// EVALSHA finds a script only by the id SCRIPT LOAD gives it, so every
// script's id must be exactly what the server computes.

#include "redlock/scripts/scripts.hpp"
#include "redis_client.hpp"
#include "redis_server.hpp"
#include "redlock/scripts/semaphore_scripts.hpp"
#include "util/sha1.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

using namespace redsync::test;

TEST_SUITE("scripts") {
  TEST_CASE("every script's id is the SHA1 that SCRIPT LOAD returns for its source") {
    namespace rd = redsync::detail;
    const std::vector<std::pair<const char*, const rd::lua_script*>> scripts = {
        {"acquire", &rd::acquire_script()},
        {"leave", &rd::leave_script()},
        {"check", &rd::check_script()},
        {"release", &rd::release_script()},
        {"extend", &rd::extend_script()},
        {"fence", &rd::fence_script()},
        {"record_read", &rd::record_read_script()},
        {"record_stamp", &rd::record_stamp_script()},
        {"semaphore_acquire", &rd::semaphore_acquire_script()},
        {"semaphore_acquire_count_only", &rd::semaphore_acquire_count_only_script()},
        {"semaphore_release", &rd::semaphore_release_script()},
        {"semaphore_extend", &rd::semaphore_extend_script()},
        {"semaphore_fence", &rd::semaphore_fence_script()},
    };
    redis_server server;
    redis_client client(server);
    for (const auto& entry : scripts) {
      // Not a structured binding: clang 14 cannot capture one (CAPTURE is a lambda).
      const auto& [name, script] = entry;
      CAPTURE(entry.first);
      const auto loaded = client.command({"SCRIPT", "LOAD", std::string(script->source)});
      REQUIRE(loaded.type == redis_client::reply::kind::string);
      CHECK(script->sha1 == loaded.str);
      // And its cluster members' variant (SPUBLISH), where it has one.
      if (script->cluster == nullptr) continue;
      const auto cluster = client.command({"SCRIPT", "LOAD", std::string(script->cluster->source)});
      REQUIRE(cluster.type == redis_client::reply::kind::string);
      CHECK(script->cluster->sha1 == cluster.str);
    }
  }

  TEST_CASE("sha1_hex agrees with SCRIPT LOAD on sources with NUL, high bytes and block-boundary lengths") {
    std::string all_bytes = "return '";
    for (int b = 0; b < 256; ++b) {
      if (b != '\'' && b != '\\' && b != '\n' && b != '\r') all_bytes += static_cast<char>(b);
    }
    all_bytes += "'";
    std::vector<std::string> sources = {"return 1", all_bytes};
    // Sources whose length sits on SHA-1's padding boundaries (a block is 64 bytes).
    for (std::size_t length = 50; length <= 140; ++length) {
      sources.push_back("return '" + std::string(length - 9, 'a') + "'");
    }
    redis_server server;
    redis_client client(server);
    for (const std::string& source : sources) {
      CAPTURE(source.size());
      const auto loaded = client.command({"SCRIPT", "LOAD", source});
      REQUIRE(loaded.type == redis_client::reply::kind::string);
      CHECK(redsync::detail::sha1_hex(source) == loaded.str);
    }
  }
}
