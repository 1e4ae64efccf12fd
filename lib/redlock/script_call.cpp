// Encoding script calls as EVALSHA, deriving the EVAL form, and sending with
// the EVAL fallback on NOSCRIPT.

#include "redlock/script_call.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <utility>

namespace redsync::detail {

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

wire_command to_eval(const script_call& call) {
  // EVALSHA's encoding is "*<argc>\r\n$7\r\nEVALSHA\r\n$40\r\n<sha1>\r\n<rest>";
  // EVAL's differs only in the first two arguments.
  const std::string& w = *call.evalsha;
  const std::size_t argc_end = w.find("\r\n") + 2;
  constexpr std::string_view evalsha_head = "$7\r\nEVALSHA\r\n$40\r\n";
  const std::size_t rest = argc_end + evalsha_head.size() + 40 + 2;
  const std::string_view source = call.script->source;
  auto out = std::make_shared<std::string>();
  out->reserve(w.size() + source.size() + 16);
  out->append(w, 0, argc_end);
  out->append(fmt::format("$4\r\nEVAL\r\n${}\r\n", source.size()));
  out->append(source);
  out->append("\r\n");
  out->append(w, rest, std::string::npos);
  return out;
}

void send_script(node_pool& pool, std::uint64_t route, const script_call& call,
                 std::chrono::microseconds timeout, command_callback done) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  pool.send(route, call.evalsha, timeout,
            [&pool, route, call, deadline, done = std::move(done)](command_result&& r) mutable {
              const bool noscript = r.status == transport_status::ok && r.value.is_error() &&
                                    r.value.str.starts_with("NOSCRIPT");
              if (!noscript) return done(std::move(r));
              // The node lost its script cache (SCRIPT FLUSH, restart): send
              // the source itself, which also caches it again.
              const auto left =
                  std::chrono::duration_cast<std::chrono::microseconds>(deadline - clock::now());
              const auto first_latency = r.latency;
              pool.send(route, to_eval(call), std::max(left, std::chrono::microseconds{1000}),
                        [first_latency, done = std::move(done)](command_result&& r2) {
                          r2.latency += first_latency;
                          done(std::move(r2));
                        });
            });
}

}  // namespace redsync::detail
