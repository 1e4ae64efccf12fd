// Test helpers: what a lock's or a semaphore's keys hold on one node (or
// whether any of several holds a key), how many scripts the node ran and how
// many waiters listen, read with a plain client.
#pragma once

#include "redis_client.hpp"
#include "redis_server.hpp"

#include <cstddef>
#include <initializer_list>
#include <string>

namespace redsync::test {

/// Acquire, extend and release script calls the node has served (EVALSHA or EVAL).
inline long long script_calls(redis_client& c) {
  return c.calls("evalsha") + c.calls("eval");
}

/// True when none of the nodes `nodes` of `c` holds the key `name`.
inline bool absent_on(cluster& c, const std::string& name, std::initializer_list<std::size_t> nodes) {
  for (std::size_t i : nodes)
    if (redis_client(c[i]).exists(name)) return false;
  return true;
}

/// True when `name`'s waiting line (the sorted set NAME:redsync-line) holds
/// exactly `waiters` waiters on every node of `c`.
inline bool line_on_every_node(cluster& c, const std::string& name, long long waiters) {
  for (std::size_t i = 0; i < c.size(); ++i)
    if (redis_client(c[i]).command({"ZCARD", name + ":redsync-line"}).integer != waiters) return false;
  return true;
}

/// The sorted set that holds a semaphore's permits on a standalone node.
inline std::string semaphore_key(const std::string& name) {
  return "redsync:sem:{" + name + "}";
}

/// How many permits (live or not yet purged) the node holds for semaphore `name`.
inline long long permits_on(redis_client& c, const std::string& name) {
  return c.command({"ZCARD", semaphore_key(name)}).integer;
}

/// How many waiters listen for a name's releases on this server: each has its
/// own channel, the name's release channel, ':', SHA1 of its value
/// (lib/redlock/scripts/scripts.hpp, waiter_channel). `release_channel`:
/// "redsync:release:NAME" on a standalone node, "redsync:release:{NAME}"
/// (sharded) on a cluster master.
inline long long waiter_channels(const redis_server& s, const std::string& release_channel,
                                 bool sharded = false) {
  const auto r =
      redis_client(s).command({"PUBSUB", sharded ? "SHARDCHANNELS" : "CHANNELS", release_channel + ":*"});
  return static_cast<long long>(r.elements.size());
}

}  // namespace redsync::test
