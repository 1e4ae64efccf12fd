// redsync_server_replay: sends N acquire + release cycles on one name to one
// redis-server, one round trip at a time as a Redlock client does to each
// node, so that scripts/profile-server can count the instructions the
// server spends per cycle under callgrind (exact and repeatable, whatever
// else the machine is doing, unlike CPU time).
//
//   redsync_server_replay PORT WORKLOAD N [PEER_ACQUIRE.lua PEER_RELEASE.lua]
//
// Workloads, each an acquire round trip then a release round trip:
//   floor           PING, PING
//   set_del         SET NX PX, DEL (no compare)
//   empty_script    EVALSHA of "return 1", twice
//   bare            SET NX PX, compare-and-delete script (bare Redlock)
//   multi_set_exec  MULTI SET NX PX EXEC, DEL
//   tx_fence        MULTI SET NX PX HINCRBY EXEC, DEL
//   tx_guard        ... + HMGET of the node record, DEL
//   ours_acquire    our acquisition transaction (+ TIME), DEL
//   ours_release    SET NX PX, our release script
//   ours            our acquisition transaction, our release script
//   script          our acquire script, our release script (before issue 12)
//   peer            the peer's acquire and release scripts (files given)
//   peer_acquire    the peer's acquire script, DEL
//   peer_release    SET NX PX, the peer's release script

#include "redlock/scripts/fast_acquire.hpp"
#include "redlock/scripts/script_call.hpp"
#include "redlock/scripts/scripts.hpp"
#include "util/sha1.hpp"

#include <hiredis/hiredis.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

using namespace redsync::detail;

namespace {

redisContext* context = nullptr;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "redsync_server_replay: %s\n", why.c_str());
  std::exit(1);
}

// Writes `wire` (one or more commands) and reads `replies` replies.
void round_trip(const std::string& wire, int replies) {
  if (redisAppendFormattedCommand(context, wire.data(), wire.size()) != REDIS_OK) die(context->errstr);
  for (int k = 0; k < replies; ++k) {
    void* r = nullptr;
    if (redisGetReply(context, &r) != REDIS_OK) die(context->errstr);
    const auto* reply = static_cast<redisReply*>(r);
    if (reply->type == REDIS_REPLY_ERROR) die(std::string("error reply: ") + reply->str);
    freeReplyObject(r);
  }
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  if (!in) die(std::string("cannot read ") + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string evalsha(const lua_script& s, std::vector<std::string_view> keys,
                    std::vector<std::string_view> args) {
  round_trip(*encode_command({"SCRIPT", "LOAD", s.source}), 1);
  return *make_script_call(s, keys, args).evalsha;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 6) die("usage: redsync_server_replay PORT WORKLOAD N [PEER_ACQUIRE PEER_RELEASE]");
  const int port = std::atoi(argv[1]);
  const std::string workload = argv[2];
  const int n = std::atoi(argv[3]);
  context = redisConnect("127.0.0.1", port);
  if (context == nullptr || context->err) die("cannot connect");

  const std::string name = "profile", value = "v-0123456789abcdef01234", expiry = "10000";
  const std::string line = line_key(name), leases = lease_key(name), channel = release_channel(name);
  const std::string set_nx = *encode_command({"SET", name, value, "NX", "PX", expiry});
  const std::string del = *encode_command({"DEL", name});
  const std::string multi = *encode_command({"MULTI"}), exec = *encode_command({"EXEC"});
  const std::string fence = *encode_command({"HINCRBY", record_key, "fence", "1"});
  const std::string guard = *encode_command({"HMGET", record_key, "run", "since", "window"});

  static const std::string one_source = "return 1";
  static const std::string cad_source =
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
  const lua_script one{one_source, sha1_hex(one_source)};
  const lua_script cad{cad_source, sha1_hex(cad_source)};
  static std::string peer_acquire_source, peer_release_source;
  if (argc == 6) {
    peer_acquire_source = read_file(argv[4]);
    peer_release_source = read_file(argv[5]);
  }
  const lua_script peer_acquire{peer_acquire_source, sha1_hex(peer_acquire_source)};
  const lua_script peer_release{peer_release_source, sha1_hex(peer_release_source)};
  const auto ours_release = [&] {
    // As mutex_state sends it: value, "0" (a release, not an undo), channel.
    return evalsha(release_script(), {name, line, leases}, {value, "0", channel});
  };

  std::string acquire, release;
  int acquire_replies = 1;
  if (workload == "floor") {
    acquire = release = *encode_command({"PING"});
  } else if (workload == "set_del") {
    acquire = set_nx, release = del;
  } else if (workload == "empty_script") {
    acquire = release = evalsha(one, {name}, {value});
  } else if (workload == "bare") {
    acquire = set_nx, release = evalsha(cad, {name}, {value});
  } else if (workload == "multi_set_exec") {
    acquire = multi + set_nx + exec, acquire_replies = 3, release = del;
  } else if (workload == "tx_fence") {
    acquire = multi + set_nx + fence + exec, acquire_replies = 4, release = del;
  } else if (workload == "tx_guard") {
    acquire = multi + set_nx + fence + guard + exec, acquire_replies = 5, release = del;
  } else if (workload == "ours_acquire") {
    acquire = *encode_fast_acquire(name, value, expiry), acquire_replies = fast_acquire_replies,
    release = del;
  } else if (workload == "ours_release") {
    acquire = set_nx, release = ours_release();
  } else if (workload == "ours") {
    acquire = *encode_fast_acquire(name, value, expiry), acquire_replies = fast_acquire_replies;
    release = ours_release();
  } else if (workload == "script") {
    acquire = evalsha(acquire_script(), {name, record_key, line, leases},
                      {value, expiry, "1700000000000000", "2400", "0", "1700000000000000", channel});
    release = ours_release();
  } else if (argc == 6 && workload == "peer") {
    acquire = evalsha(peer_acquire, {name}, {value, expiry}),
    release = evalsha(peer_release, {name}, {value});
  } else if (argc == 6 && workload == "peer_acquire") {
    acquire = evalsha(peer_acquire, {name}, {value, expiry}), release = del;
  } else if (argc == 6 && workload == "peer_release") {
    acquire = set_nx, release = evalsha(peer_release, {name}, {value});
  } else {
    die("unknown workload \"" + workload + "\" (or the peer's scripts are missing)");
  }
  for (int i = 0; i < n; ++i) {
    round_trip(acquire, acquire_replies);
    round_trip(release, 1);
  }
  redisFree(context);
  return 0;
}
