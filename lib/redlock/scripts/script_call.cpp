// Encoding script calls as EVALSHA, deriving the EVAL and FCALL forms, and
// sending with the EVAL fallback on NOSCRIPT or the FUNCTION LOAD on a
// missing function.

#include "redlock/scripts/script_call.hpp"

#include "redlock/scripts/function_library.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

namespace redsync::detail {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::microseconds;

// `call`'s encoding with its first two arguments (EVALSHA and the SHA1)
// replaced by `verb` and `first`.
wire_command with_head(const script_call& call, std::string_view verb, std::string_view first) {
  // EVALSHA's encoding is "*<argc>\r\n$7\r\nEVALSHA\r\n$40\r\n<sha1>\r\n<rest>".
  const std::string& w = *call.evalsha;
  const std::size_t argc_end = w.find("\r\n") + 2;
  constexpr std::string_view evalsha_head = "$7\r\nEVALSHA\r\n$40\r\n";
  const std::size_t rest = argc_end + evalsha_head.size() + 40 + 2;
  auto out = std::make_shared<std::string>();
  out->reserve(w.size() + first.size() + 32);
  out->append(w, 0, argc_end);
  out->append(fmt::format("${}\r\n{}\r\n${}\r\n", verb.size(), verb, first.size()));
  out->append(first);
  out->append("\r\n");
  out->append(w, rest, std::string::npos);
  return out;
}

microseconds left_until(clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<microseconds>(deadline - clock::now());
  return std::max(left, microseconds{1000});
}

bool is_error_starting(const command_result& r, std::string_view prefix) {
  return r.status == transport_status::ok && r.value.is_error() && r.value.str.starts_with(prefix);
}

bool unknown_command(const command_result& r) {
  return r.status == transport_status::ok && r.value.is_error() &&
         r.value.str.find("unknown command") != std::string::npos;
}

std::string no_functions(std::string_view command, std::string_view said) {
  return fmt::format(
      "redsync_options::script_mode is functions, but this node does not know {} (Redis < 7, or the "
      "command was renamed): use script_mode::eval for it, or Redis >= 7.0. The node said: {}",
      command, said);
}

void tell_sent(const script_sent& behind, member_slot pool, clock::time_point deadline) {
  if (behind) behind(pool, left_until(deadline));
}

void send_eval(member_slot pool, std::uint64_t route, const script_call& call, microseconds timeout,
               command_callback done, fallback_wanted wanted, script_sent behind) {
  const auto deadline = clock::now() + timeout;
  pool.send(route, call.evalsha, timeout,
            [pool, route, call, deadline, done = std::move(done), wanted = std::move(wanted),
             behind](command_result&& r) mutable {
              if (!is_error_starting(r, "NOSCRIPT")) return done(std::move(r));
              if (wanted && !wanted()) return done(std::move(r));
              // The node lost its script cache (SCRIPT FLUSH, restart): send
              // the source itself, which also caches it again.
              pool.note(pool_event::script_loaded, call.script->sha1, clock::now() - r.latency);
              const auto first_latency = r.latency;
              pool.send(route, to_eval(call), left_until(deadline),
                        [first_latency, done = std::move(done)](command_result&& r2) {
                          r2.latency += first_latency;
                          done(std::move(r2));
                        });
              tell_sent(behind, pool, deadline);
            });
  tell_sent(behind, pool, deadline);
}

// FUNCTION LOAD REPLACE of the call's library, then FCALL again, pipelined
// on one connection: the load's reply arrives before the call's, so the
// call's callback knows whether the load failed (and says why).
void load_and_call(member_slot pool, std::uint64_t route, const script_call& call, clock::time_point deadline,
                   microseconds first_latency, command_callback done, const script_sent& behind = {}) {
  auto load_error = std::make_shared<std::optional<std::string>>();
  const std::string library = function_library(*call.script);
  pool.send(route, encode_command({"FUNCTION", "LOAD", "REPLACE", library}), left_until(deadline),
            [load_error](command_result&& r) {
              if (r.status != transport_status::ok) {
                *load_error = r.error.empty() ? std::string("no answer") : r.error;
              } else if (r.value.is_error()) {
                *load_error = r.value.str;
              }
            });
  pool.send(route, to_fcall(call), left_until(deadline),
            [load_error, first_latency, done = std::move(done)](command_result&& r) {
              r.latency += first_latency;
              if (load_error->has_value() && r.status == transport_status::ok && r.value.is_error()) {
                const std::string& why = **load_error;
                if (why.find("unknown command") != std::string::npos) {
                  r.error = no_functions("FUNCTION", why);
                } else {
                  // The server's words first: classify_server_error reads
                  // NOPERM (the ACL lacks +function|load) from them.
                  r.error = fmt::format(
                      "{} (from FUNCTION LOAD, which redsync_options::script_mode = functions sends "
                      "to load a script on each node)",
                      why);
                }
              }
              done(std::move(r));
            });
  tell_sent(behind, pool, deadline);
}

void send_fcall(member_slot pool, std::uint64_t route, const script_call& call, microseconds timeout,
                command_callback done, fallback_wanted wanted, script_sent behind) {
  const auto deadline = clock::now() + timeout;
  pool.send(route, to_fcall(call), timeout,
            [pool, route, call, deadline, done = std::move(done), wanted = std::move(wanted),
             behind](command_result&& r) mutable {
              if (unknown_command(r)) {
                r.error = no_functions("FCALL", r.value.str);
                return done(std::move(r));
              }
              // Not loaded on this node yet, or lost (FUNCTION FLUSH, a
              // restart without persistence).
              if (!is_error_starting(r, "ERR Function not found")) return done(std::move(r));
              if (wanted && !wanted()) return done(std::move(r));
              pool.note(pool_event::function_loaded, call.script->sha1, clock::now() - r.latency);
              load_and_call(pool, route, call, deadline, r.latency, std::move(done), behind);
            });
  tell_sent(behind, pool, deadline);
}

}  // namespace

script_call make_script_call(const lua_script& s, const std::vector<std::string_view>& keys,
                             const std::vector<std::string_view>& args) {
  const std::string numkeys = std::to_string(keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(s.sha1);
  argv.push_back(numkeys);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  script_call call;
  call.script = &s;
  call.evalsha = encode_command(argv);
  return call;
}

void add_cluster_form(script_call& call, const std::vector<std::string_view>& keys,
                      const std::vector<std::string_view>& args) {
  const lua_script& s = call.script->cluster ? *call.script->cluster : *call.script;
  call.cluster_script = &s;
  call.cluster_evalsha = make_script_call(s, keys, args).evalsha;
}

void add_cluster_group(script_call& call, const std::vector<std::string_view>& keys,
                       const std::vector<std::string_view>& args) {
  const lua_script& s = call.script->cluster ? *call.script->cluster : *call.script;
  call.cluster_script = &s;
  call.cluster_groups.push_back(make_script_call(s, keys, args).evalsha);
}

wire_command to_eval(const script_call& call) {
  return with_head(call, "EVAL", call.script->source);
}

wire_command to_fcall(const script_call& call) {
  return with_head(call, "FCALL", function_name(*call.script));
}

void send_script(script_mode mode, member_slot pool, std::uint64_t route, const script_call& call,
                 microseconds timeout, command_callback done, fallback_wanted wanted, script_sent behind) {
  if (pool.is_cluster() && call.cluster_evalsha)
    return send_script(mode, pool, route, call.for_member(true), timeout, std::move(done), std::move(wanted),
                       std::move(behind));
  if (mode == script_mode::functions)
    return send_fcall(pool, route, call, timeout, std::move(done), std::move(wanted), std::move(behind));
  send_eval(pool, route, call, timeout, std::move(done), std::move(wanted), std::move(behind));
}

void send_script_in_order(script_mode mode, member_slot pool, std::uint64_t route, const script_call& call,
                          microseconds timeout, command_callback done) {
  if (pool.is_cluster() && call.cluster_evalsha)
    return send_script_in_order(mode, pool, route, call.for_member(true), timeout, std::move(done));
  if (mode == script_mode::functions)
    return load_and_call(pool, route, call, clock::now() + timeout, microseconds::zero(), std::move(done));
  pool.send(route, to_eval(call), timeout, std::move(done));
}

}  // namespace redsync::detail
