#pragma once

// The Lua scripts the Redlock flows run on each node, and how they are sent:
// EVALSHA first, EVAL on NOSCRIPT (so SCRIPT FLUSH or a restarted node is
// harmless).

#include "node_pool.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

struct lua_script {
  std::string_view source;
  std::string sha1;  // lowercase hex, what SCRIPT LOAD returns
};

// Every script but the fence write-back takes all of a lock's names as KEYS
// (several for a multi-name lock) and is all-or-nothing on a node.

// Acquisition with a fencing counter and a fair waiting line.
// KEYS = the names, the fencing counter, the waiting line, the leases;
// ARGV = value, expiry ms, arrival (µs), lease ms, "1" to wait in line.
// Returns the token (>= 1) where SET NX won on every name; else -2 (busy,
// first in line), -1 (busy, others ahead) or nil (busy, not waiting).
const lua_script& acquire_script();

// Leaving the waiting line. KEYS = line, leases; ARGV = value.
const lua_script& leave_script();

// Fencing write-back. KEYS[1] = name, KEYS[2] = counter, ARGV[1] = value,
// ARGV[2] = token. Only where the key still holds our value, raises the
// counter to at least the token. Returns 1 if the value was ours, else 0.
const lua_script& fence_script();

// Keys and channel derived from a lock's (first) name.
std::string fence_key(std::string_view name);
std::string line_key(std::string_view name);
std::string lease_key(std::string_view name);
std::string release_channel(std::string_view name);

// KEYS = the names, then the waiting line; ARGV = value, release channel.
// Deletes the names holding our value and, if anyone waits, publishes the
// next in line's value on the release channel.
// Returns -1 if any name holds another value (left alone), else 1 if
// something of ours was deleted, else 0 (all missing).
const lua_script& release_script();

// KEYS = the names, ARGV[1] = value, ARGV[2] = expiry in ms,
// ARGV[3] = "1" to re-create missing names (set-NX-on-extend), else "0".
// Returns 1 if every name is ours with its TTL now `expiry`, 0 if some name
// is missing, -1 if some name holds another value.
const lua_script& extend_script();

// KEYS = the names, ARGV[1] = value.
// Returns 1 if every name holds our value, -1 if some name holds another
// value, else 0 (some missing).
const lua_script& check_script();

// A script call encoded once for all nodes as EVALSHA. The EVAL form is
// derived from those bytes only when a node answers NOSCRIPT (rare).
struct script_call {
  const lua_script* script = nullptr;
  wire_command evalsha;

  explicit operator bool() const noexcept { return static_cast<bool>(evalsha); }
};

// The EVAL form of `call`: same arguments, the script's source instead of
// its SHA1.
wire_command to_eval(const script_call& call);

script_call make_script_call(const lua_script& s, const std::vector<std::string_view>& keys,
                             const std::vector<std::string_view>& args);

// Sends `call` to `pool` as EVALSHA and, if the node answers NOSCRIPT, again
// as EVAL on the same route within what is left of `timeout`. `done` runs once.
void send_script(node_pool& pool, std::uint64_t route, const script_call& call,
                 std::chrono::microseconds timeout, command_callback done);

}  // namespace redsync::detail
