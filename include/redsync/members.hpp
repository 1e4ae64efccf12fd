#pragma once

/// \file
/// Lists of members as one string: `REDSYNC_NODES`, a `--nodes` option, a
/// configuration value. Members are separated by commas, and so are the
/// seeds of a cluster member, so a list is split by one rule: a piece that
/// does not start with a scheme continues the cluster URI before it.
///
/// \code
/// // REDSYNC_NODES=redis://a:6379,redis+cluster://b1:7000,b2:7000,rediss://c:6380
/// redsync::Redsync rs(redsync::members_from_env());  // three members
/// \endcode

#include <redsync/export.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace redsync {

/// Splits `list` into member URIs for `Redsync`'s constructor and checks
/// each with `member_options::parse`.
///
/// Members are separated by ','. A piece that starts with a scheme
/// (`redis://`, `rediss://`, `unix:`, `redis+cluster://`, ... in any case)
/// starts a member; after a `redis+cluster://` or `rediss+cluster://` URI,
/// a piece that does not is one more seed of that cluster:
/// `parse_members("redis://a:1,redis+cluster://b:2,c:3,rediss://d:4")` is
/// `{"redis://a:1", "redis+cluster://b:2,c:3", "rediss://d:4"}`. Spaces and
/// tabs around a member, and around a seed, are dropped (not inside user
/// info, which is kept as written). A ',' inside a password must be written
/// `%2C`.
///
/// Throws `config_error` for an empty list, an empty member (`a,,b`, a
/// trailing ','), a piece without a scheme that no cluster URI comes before,
/// or a member that does not parse; the message names the member by its
/// place (`node URI 2 of 3`) and shows the URI only as
/// `member_options::parse` does, with every password as "***".
/// Thread-safe: touches no shared state.
REDSYNC_API std::vector<std::string> parse_members(std::string_view list);

/// `parse_members` of the environment variable `var` (default
/// `REDSYNC_NODES`, which `eval "$(scripts/testbed env)"` sets):
/// `redsync::Redsync rs(redsync::members_from_env());`.
///
/// Throws `config_error` naming `var` when it is unset, empty or only
/// spaces, and for every error of `parse_members` (the message then starts
/// with `var`: `REDSYNC_NODES: node URI 2 of 3 is empty`). Reads the
/// environment with `std::getenv`: do not call it while another thread
/// changes the environment.
REDSYNC_API std::vector<std::string> members_from_env(const char* var = "REDSYNC_NODES");

}  // namespace redsync
