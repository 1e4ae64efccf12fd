// Why a shared or an exclusive hold of a name was refused, when what stands
// in the way is the other side of the read-write lock: the library says only
// that a node refused (node_status::taken, no reason; a semaphore's holders
// it does name: acquire_failure.cpp's "clash"), so the tool reads what the
// refusing nodes hold and words it. Readers keep a mark in the lock key
// (lock_line.hpp: readers_mark); a writer keeps its value there.
#pragma once

#include "node_probe.hpp"

#include <redsync/error.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace redsync::cli {

/// The commands whose replies rw_refusal_reason() reads for lock `name`.
std::vector<std::vector<std::string>> rw_refusal_commands(const std::string& name);

/// Why a node refused a hold of `name` (shared: a reader's), from its
/// replies to rw_refusal_commands(): for a writer `"NAME" is held by
/// readers`; for a reader `"NAME" is held by a writer`, or where a live
/// writer waits in the line, `"NAME" is held by readers and a writer waits
/// ahead in its line` or `a writer waits ahead in the line of "NAME"`.
/// nullopt when it is none of these (another writer holds it: the plain
/// refusal says so) or the replies cannot be read.
std::optional<std::string> rw_refusal_reason(const std::string& name, bool shared,
                                             const std::vector<probe_reply>& replies);

/// Gives each node of `r` that refused with no reason (taken, no message)
/// the reason rw_refusal_reason() finds on it; `uris` are the nodes of the
/// acquisition, in its order. Reads the refusing nodes' keys at once,
/// within `timeout`; a node that cannot be read keeps its plain refusal.
void explain_rw_refusals(result& r, const std::vector<std::string>& uris, const std::string& name,
                         bool shared, std::chrono::milliseconds timeout);

}  // namespace redsync::cli
