// Test harness: the least-privilege ACL of a lock user, in one place for
// every test that runs as such a user. docs/acl.md shows the same rules;
// tests/redis/redlock/acl_test.cpp checks that the document contains them
// word for word, so the document cannot drift from what the tests prove.
#pragma once

#include <redsync/options.hpp>

#include <string>
#include <utility>
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

/// lock_acl_patterns then lock_acl_commands(mode), one rule an element.
inline std::vector<std::string> lock_acl_rule_list(redsync::script_mode mode) {
  std::vector<std::string> out = lock_acl_patterns;
  for (auto& c : lock_acl_commands(mode)) out.push_back(std::move(c));
  return out;
}

/// Patterns then commands, space-separated: what follows
/// `ACL SETUSER locker reset on >PASSWORD ` in docs/acl.md.
inline std::string lock_acl_rules(redsync::script_mode mode) {
  std::string out;
  for (const auto& rule : lock_acl_rule_list(mode)) {
    if (!out.empty()) out += ' ';
    out += rule;
  }
  return out;
}

/// The user the ACL tests lock as (docs/acl.md's example names it `locker`
/// too), and its password.
inline constexpr const char* lock_user = "locker";
inline constexpr const char* lock_user_password = "locker-secret";

/// "locker:PASSWORD@": lock_user's user info in a node URI.
inline std::string lock_user_info() {
  return std::string(lock_user) + ":" + lock_user_password + "@";
}

/// redis-server arguments (config::extra_args) that create lock_user with
/// exactly `rules` (e.g. lock_acl_rule_list(mode)), in the server's startup
/// config so a restart keeps it.
inline std::vector<std::string> lock_user_args(const std::vector<std::string>& rules) {
  std::vector<std::string> out = {"--user", lock_user, "reset", "on", std::string(">") + lock_user_password};
  out.insert(out.end(), rules.begin(), rules.end());
  return out;
}

/// What a cluster member's masters need on top of lock_acl_rules (docs/acl.md,
/// "Cluster members"): the keys' hash-tagged forms (`{app:...}` for names
/// without a tag, the per-slot records `redsync:node:{T}`), the slot map
/// (CLUSTER SHARDS, or SLOTS before Redis 7), ASKING during a migration, and
/// sharded wake-ups (SPUBLISH in the scripts, SSUBSCRIBE / SUNSUBSCRIBE with a
/// PING behind it for the waiters), and the server mark the acquisition
/// reads and writes (OBJECT ENCODING, SETRANGE).
inline const std::vector<std::string> cluster_acl_extra = {
    "~{app:*", "~redsync:node:*", "+cluster|shards", "+cluster|slots", "+asking", "+spublish", "+ssubscribe",
    "+sunsubscribe", "+ping",
    // The server mark (lib/redlock/scripts/server_mark.hpp).
    "+object|encoding", "+setrange"};

/// Durable mode (mutex_options::durable_replicas) adds WAIT, standalone or cluster.
inline const std::string durable_acl_extra = "+wait";

/// lock_acl_rules(mode) then cluster_acl_extra: what follows
/// `ACL SETUSER locker reset on >PASSWORD ` for a cluster member's masters.
inline std::string cluster_lock_acl_rules(redsync::script_mode mode) {
  std::string out = lock_acl_rules(mode);
  for (const auto& r : cluster_acl_extra) out += ' ' + r;
  return out;
}

}  // namespace redsync::test
