// Exit statuses of the redsync tool. The authoritative list, with the reasons
// for each value, is the comment at the top of main.cpp and `redsync --help`.
#pragma once

namespace redsync::cli {

/// Exit statuses other than the command's own.
namespace exit_status {
/// Success (`status`/`ping`: every node answered; `help`, `--version`).
inline constexpr int ok = 0;
/// `ping`: some nodes are down but a quorum is up.
inline constexpr int degraded = 1;
/// Bad usage or configuration (EX_USAGE).
inline constexpr int usage = 64;
/// Too few nodes reachable, or voting, to make a quorum: unreachable, timed
/// out, held back by the restart guard or unverified (EX_UNAVAILABLE).
inline constexpr int unavailable = 69;
/// Internal error: an unexpected exception or system call failure (EX_SOFTWARE).
inline constexpr int software = 70;
/// The lock is held by another holder: not acquired within --wait/--tries
/// (EX_TEMPFAIL).
inline constexpr int not_acquired = 75;
/// Nodes answer every attempt with an error retrying cannot fix (WRONGTYPE,
/// READONLY, ...), on too many nodes for a quorum (EX_PROTOCOL).
inline constexpr int node_errors = 76;
/// Authentication or permission refused (NOAUTH, WRONGPASS, NOPERM) by too
/// many nodes for a quorum (EX_NOPERM).
inline constexpr int refused = 77;
/// The lock was lost while the command ran.
inline constexpr int lost = 79;
/// The command was found but could not be executed (as shells do).
inline constexpr int cannot_execute = 126;
/// The command was not found (as shells do).
inline constexpr int not_found = 127;
/// Added to a signal number when a process died of that signal.
inline constexpr int signal_base = 128;
}  // namespace exit_status

}  // namespace redsync::cli
