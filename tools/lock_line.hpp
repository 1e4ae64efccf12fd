// What `redsync status` reads about a lock name beyond its key: the fair
// waiting line (who waits, since when, with how much lease left) merged over
// the nodes, a key reserved by a release for the head of the line, and each
// node's fencing counter. Where these live on a node (lib/redlock/
// scripts.hpp): the line is the sorted set NAME:redsync-line (member: the
// waiter's lock value, score: its arrival, µs since the epoch on its own
// clock), the leases the hash NAME:redsync-leases (member -> server ms until
// which the waiter counts), and the
// fencing counter the field `fence` of the hash redsync:node. An RWMutex's
// readers (redsync lock --shared) keep a mark in the lock key and each
// reader in the sorted set NAME:redsync-readers (member: the reader's value,
// score: its expiry, server ms); their entries in the line start with
// reader_tag (holder_value.hpp).
// Pure, except for the commands it names.
#pragma once

#include "holder_value.hpp"
#include "node_probe.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::cli {

/// The commands whose replies add_line() reads for lock `name`, in order.
std::vector<std::vector<std::string>> line_commands(const std::string& name);

/// One waiter, merged over the nodes.
struct waiter {
  std::string value;
  /// When it joined the line (its own clock), µs since the epoch.
  long long arrival_us = 0;
  /// Nodes whose line holds it with a live lease.
  std::size_t nodes = 0;
  /// The longest lease left on any of those nodes.
  std::chrono::milliseconds lease_left{0};
  /// Who it is, for values `redsync lock` made.
  std::optional<holder_identity> identity{};
};

/// Adds one node's line to `line` (kept oldest first): `members` and `leases`
/// are the replies to line_commands(), `server_now_ms` the node's clock.
/// Waiters whose lease has run out on that node are not waiting any more
/// and are left out, as the scripts themselves would drop them.
void add_line(std::vector<waiter>& line, const probe_reply& members, const probe_reply& leases,
              long long server_now_ms);

/// The node's clock in ms from its reply to TIME, if readable.
std::optional<long long> server_ms(const probe_reply& time);

/// The fencing counter from the reply to the record's HMGET (its first
/// field), if the node has one.
std::optional<long long> fence_of(const probe_reply& record);

/// For a key value a release left for the head of the line (it starts with
/// a NUL byte): that waiter's value. nullopt for any other value.
std::optional<std::string> reserved_for(std::string_view key_value);

/// What an RWMutex's readers keep in the lock key while any of them holds
/// the name on the node (lib/redlock/scripts/lua/rw_mark.lua): nobody's
/// value; the readers themselves are in readers_command()'s set.
inline constexpr std::string_view readers_mark{"\0redsync:readers\0", 17};

/// The command whose reply live_readers() reads for lock `name`.
std::vector<std::string> readers_command(const std::string& name);

/// One reader on one node.
struct node_reader {
  std::string value;
  /// Left until it expires there.
  std::chrono::milliseconds pttl{0};
};

/// The readers of one node whose expiry has not passed, from the reply to
/// readers_command() and the node's clock (expired ones no longer count,
/// as the scripts would drop them).
std::vector<node_reader> live_readers(const probe_reply& members, long long server_now_ms);

/// "root@web1 pid 4242" for values `redsync lock` made, else "value \"...\"";
/// "reader root@web1 pid 4242" for a reader's (redsync lock --shared).
std::string describe_waiter(const waiter& w);

}  // namespace redsync::cli
