// Test helpers: what a lock's or a semaphore's keys hold on one node, and
// how many scripts the node ran, read with a plain client.
#pragma once

#include "redis_client.hpp"

#include <string>

namespace redsync::test {

/// Acquire, extend and release script calls the node has served (EVALSHA or EVAL).
inline long long script_calls(redis_client& c) {
  return c.calls("evalsha") + c.calls("eval");
}

/// The sorted set that holds a semaphore's permits on a standalone node.
inline std::string semaphore_key(const std::string& name) {
  return "redsync:sem:{" + name + "}";
}

/// How many permits (live or not yet purged) the node holds for semaphore `name`.
inline long long permits_on(redis_client& c, const std::string& name) {
  return c.command({"ZCARD", semaphore_key(name)}).integer;
}

}  // namespace redsync::test
