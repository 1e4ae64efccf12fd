// Test harness: the least-privilege ACL of a lock user, in one place for
// every test that runs as such a user. docs/acl.md shows the same rules;
// tests/redis/redlock/acl_test.cpp checks that the document contains them
// word for word, so the document cannot drift from what the tests prove.
#pragma once

#include <redsync/options.hpp>

#include <string>
#include <vector>

namespace redsync::test {

/// Key and channel patterns: lock and semaphore names start with `app:`.
inline const std::vector<std::string> lock_acl_patterns = {"~app:*", "~redsync:node", "&redsync:release:*",
                                                           "~redsync:sem:{app:*", "&redsync:sem-release:*"};

/// The commands a lock user needs in `mode`: the handshake (INFO), the
/// waiters' subscriber, the uncontended acquisition's transaction, how
/// scripts run, and every command the scripts call.
inline std::vector<std::string> lock_acl_commands(redsync::script_mode mode) {
  std::vector<std::string> out = {"+info", "+subscribe", "+unsubscribe", "+multi", "+exec"};
  if (mode == redsync::script_mode::functions) {
    out.insert(out.end(), {"+fcall", "+function|load"});
  } else {
    out.insert(out.end(), {"+evalsha", "+eval"});
  }
  out.insert(out.end(),
             {"+get", "+set", "+del", "+exists", "+time", "+pexpire", "+pttl", "+publish", "+zadd", "+zrange",
              "+zrem", "+zscore", "+hget", "+hset", "+hdel", "+hmget", "+hincrby", "+zremrangebyscore"});
  return out;
}

/// Patterns then commands, space-separated: what follows
/// `ACL SETUSER locker reset on >PASSWORD ` in docs/acl.md.
inline std::string lock_acl_rules(redsync::script_mode mode) {
  std::string out;
  auto add = [&out](const std::string& rule) {
    if (!out.empty()) out += ' ';
    out += rule;
  };
  for (const auto& p : lock_acl_patterns) add(p);
  for (const auto& c : lock_acl_commands(mode)) add(c);
  return out;
}

}  // namespace redsync::test
