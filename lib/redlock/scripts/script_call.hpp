#pragma once

// How the Redlock flows send a Lua script to a node: encoded once for all
// nodes as EVALSHA, and sent again as EVAL when a node answers NOSCRIPT (so
// SCRIPT FLUSH or a restarted node is harmless). With script_mode::functions
// the same call goes as FCALL of the script's function library
// (function_library.hpp), loaded with FUNCTION LOAD REPLACE when a node
// answers that the function is not found, then called again.

#include "transport/member.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::detail {

// A script's source and its id; the scripts themselves are in scripts.hpp.
struct lua_script {
  std::string_view source;
  std::string sha1;  // lowercase hex, what SCRIPT LOAD returns
  // What a cluster member runs instead, when it differs (a script that
  // publishes a wake-up does so with SPUBLISH there: embed_lua.py); null
  // when this script runs on every kind of member.
  const lua_script* cluster = nullptr;
};

// A script call encoded once for all nodes as EVALSHA. The EVAL form is
// derived from those bytes only when a node answers NOSCRIPT (rare).
struct script_call {
  const lua_script* script = nullptr;
  wire_command evalsha;
  // The same call with a cluster member's keys (cluster_keys.hpp) and the
  // script's cluster variant (lua_script::cluster, else the script itself);
  // send_script sends it to cluster members.
  wire_command cluster_evalsha;
  // The script those cluster forms run (the variant, else the script).
  const lua_script* cluster_script = nullptr;
  // A lock whose names span several slots: instead of cluster_evalsha, the
  // call per slot group (cluster_keys.hpp's group_by_slot, ascending slot
  // order), each with the keys of that group's names only (slot_groups.hpp
  // sends them).
  std::vector<wire_command> cluster_groups;

  explicit operator bool() const noexcept { return static_cast<bool>(evalsha); }
  // The form for a member of this kind (not for a call made per group).
  script_call for_member(bool cluster) const {
    if (!cluster || !cluster_evalsha) return *this;
    return {cluster_script, cluster_evalsha, {}, nullptr, {}};
  }
  // The call for slot group `g` on a cluster member.
  script_call for_group(std::size_t g) const { return {cluster_script, cluster_groups[g], {}, nullptr, {}}; }
};

// The EVAL form of `call`: same arguments, the script's source instead of
// its SHA1.
wire_command to_eval(const script_call& call);

// `s` with these KEYS and ARGV, encoded as EVALSHA. The call points to `s`,
// which must outlive it (the scripts of scripts.hpp live for the program).
script_call make_script_call(const lua_script& s, const std::vector<std::string_view>& keys,
                             const std::vector<std::string_view>& args);

// Adds to `call` its cluster form: the script's cluster variant (or the
// script itself) with these KEYS and ARGV.
void add_cluster_form(script_call& call, const std::vector<std::string_view>& keys,
                      const std::vector<std::string_view>& args);

// Adds to `call` the form for its next slot group on a cluster member.
void add_cluster_group(script_call& call, const std::vector<std::string_view>& keys,
                       const std::vector<std::string_view>& args);

// The FCALL form of `call`: same arguments, the script's function name
// instead of its SHA1.
wire_command to_fcall(const script_call& call);

// Whether a script's answer is still awaited: asked before a fallback (EVAL
// after NOSCRIPT, FUNCTION LOAD + FCALL after a missing function) is sent.
// Empty = always. A script that may SET the lock key (acquire, extend with
// set_nx_on_extend) must pass one that turns false once its round has
// reported: the release that follows a failed or abandoned attempt is queued
// on the same connection, and a fallback sent after it would run after it
// and set a key nobody releases. A NOSCRIPT answer means nothing ran, so
// not sending the fallback leaves nothing behind.
using fallback_wanted = std::function<bool()>;

// Told right after each form of a script was handed to the pool (the call
// itself, and a fallback: EVAL, or FCALL after FUNCTION LOAD), with the
// pool and what is left of the timeout: a command it sends on the same
// route is written right behind that form, on the same connection
// (durable_wait.hpp's WAIT). Empty = nothing.
using script_sent = std::function<void(member_slot pool, std::chrono::microseconds left)>;

// Sends `call` (its form for `pool`'s kind of member) to `pool` within
// `timeout`; `done` runs once.
// eval: as EVALSHA and, if the node answers NOSCRIPT, again as EVAL on the
// same route within what is left of `timeout`.
// functions: as FCALL and, if the node answers that the function is not
// found, FUNCTION LOAD REPLACE of its library then FCALL again, pipelined on
// the same route. A node without Redis Functions (Redis < 7, or FUNCTION or
// FCALL renamed away) or a refused FUNCTION LOAD gets an error reply whose
// result's `error` names the cause and redsync_options::script_mode.
// The fallback is sent only while `wanted` (if set) says so. `behind` (if
// set) is told of each form sent.
void send_script(script_mode mode, member_slot pool, std::uint64_t route, const script_call& call,
                 std::chrono::microseconds timeout, command_callback done, fallback_wanted wanted = {},
                 script_sent behind = {});

// Sends `call` so that it runs in its place on the connection, with no
// fallback sent later: EVAL with the source (eval mode), or FUNCTION LOAD
// REPLACE and FCALL pipelined (functions mode). For a command nobody awaits
// while later commands follow on the same connection (the undo of a failed
// attempt to a node that did not answer): a fallback sent after a NOSCRIPT
// answer would run after the next attempt's SET of the same value, and
// delete a lock that attempt won. Costs the script's source on the wire;
// only the failure paths use it.
void send_script_in_order(script_mode mode, member_slot pool, std::uint64_t route, const script_call& call,
                          std::chrono::microseconds timeout, command_callback done);

}  // namespace redsync::detail
