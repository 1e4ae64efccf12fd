#pragma once

// Who ran a cluster member's acquisition, read inside that acquisition: the
// server mark (docs/cluster.md, "Who answered: the server mark").
//
// node_trust counts a vote only when the record names the identity of the
// server that ran the script (node_identity.hpp: run_id, replication id,
// last load). A standalone node's identity is its connection's handshake
// INFO. On a cluster member that is not enough: a role change does not
// close client connections, so a master demoted, resynchronised from
// another server and promoted back keeps answering on a connection whose
// handshake named its old data (cluster_attack_test.cpp). Reading INFO
// before every call fixed that at the cost of half the servers' time.
//
// Instead each slot's master keeps a mark: the key redsync:node:{T}:server
// (the slot of record redsync:node:{T}), holding sha1(identity) of the
// server that wrote it, written with replication off (redis.set_repl
// REPL_NONE) and with SETRANGE, so that the string is "raw"-encoded. The
// acquisition script reads it in the same atomic step as the lock key and
// the record, and answers it as its last element; where it is missing or
// not raw, the script reads INFO itself (once), computes the identity as
// identify_server does, writes the mark and answers it (lua/mark_vote.lua,
// which embed_lua.py puts into the cluster variants of the acquisitions). The client counts
// the vote only when the answer's mark is sha1 of the identity it holds
// for that master; else it excludes the vote, reads the master's INFO
// again (cluster_router::read_identity) and the next attempt counts.
//
// Why the mark always names the data it sits in. A mark is written only by
// the script, from the INFO it read in the same atomic step, so it was true
// when written. Replication never carries it as a command (REPL_NONE). The
// data it sits in can be replaced in three ways, and each leaves no raw
// mark: a full resynchronisation, a restart that loads an RDB or AOF file,
// `DEBUG RELOAD` and a slot migration (MIGRATE/RESTORE) all create keys by
// loading a serialized value, which Redis stores as "embstr" for a string
// of at most 44 bytes (the mark has 40); and a restart without a file
// starts empty. A partial resynchronisation keeps the server's own raw
// mark, but then nothing the server acknowledged was thrown away: its data
// is a prefix of the new master's stream followed by that stream. A
// replica promoted since its data came by a full sync has no raw mark; one
// promoted with its own mark from an earlier term as master still names
// its own older identity, which no record stamped since names (a vote
// needs the record to name the identity, and every later verification
// stamped the then master's identity). Assumption: Redis stores a loaded
// string of at most 44 bytes as embstr (true of Redis 7.0 to 7.4, and
// pinned by cluster_attack_test.cpp's failback test, which fails if a full
// resynchronisation keeps the mark raw).
//
// Cost: on the hot path OBJECT ENCODING and GET of a 40-byte key; INFO only
// when a slot's master has no valid mark. The ACL needs `+object|encoding`
// and `+setrange` (docs/acl.md). Pure.

#include <cstdint>
#include <string>
#include <string_view>

namespace redsync::detail {

// The mark of a server whose identity (node_identity.hpp) is `identity`:
// its SHA1 in lowercase hex, as the scripts' redis.sha1hex computes it.
std::string server_mark(std::string_view identity);

// A cluster member's mark key for `slot`: redsync:node:{T}:server, in the
// slot of its record.
std::string cluster_server_mark_key(std::uint16_t slot);

}  // namespace redsync::detail
