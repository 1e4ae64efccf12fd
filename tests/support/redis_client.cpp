#include "redis_client.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "redis_server.hpp"

namespace redsync::test {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>((ms.count() % 1000) * 1000)};
}

redis_client::reply convert(const redisReply* r) {
  redis_client::reply out;
  using kind = redis_client::reply::kind;
  switch (r->type) {
    case REDIS_REPLY_STATUS: out.type = kind::status; break;
    case REDIS_REPLY_ERROR: out.type = kind::error; break;
    case REDIS_REPLY_STRING: out.type = kind::string; break;
    case REDIS_REPLY_INTEGER: out.type = kind::integer; break;
    case REDIS_REPLY_NIL: out.type = kind::nil; break;
    case REDIS_REPLY_ARRAY: out.type = kind::array; break;
    default: out.type = kind::string; break;  // RESP3 kinds (hiredis 1.x); we speak RESP2
  }
  if (r->type == REDIS_REPLY_INTEGER) out.integer = r->integer;
  if (r->str != nullptr) out.str.assign(r->str, r->len);
  for (std::size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
    out.elements.push_back(convert(r->element[i]));
  }
  return out;
}

std::string describe(const std::vector<std::string>& argv) {
  return argv.empty() ? std::string("(empty)") : argv.front();
}

}  // namespace

void redis_client::context_deleter::operator()(redisContext* c) const {
  redisFree(c);
}

redis_client::redis_client(const redis_server& server, client_options opts)
    : host_("127.0.0.1"),
      port_(opts.port != 0 ? opts.port : server.port()),
      unix_path_(opts.unix_socket ? server.unix_path() : std::string()),
      password_(server.password()),
      opts_(opts) {
  if (opts_.unix_socket && unix_path_.empty()) {
    throw std::runtime_error("redis_client: server on " + server.address() + " has no unix socket");
  }
  connect();
}

redis_client::~redis_client() = default;

void redis_client::connect() {
  ctx_.reset();
  auto tv = to_timeval(opts_.timeout);
  std::string where = unix_path_.empty() ? host_ + ":" + std::to_string(port_) : unix_path_;
  std::unique_ptr<redisContext, context_deleter> c(unix_path_.empty()
                                                       ? redisConnectWithTimeout(host_.c_str(), port_, tv)
                                                       : redisConnectUnixWithTimeout(unix_path_.c_str(), tv));
  if (!c) throw std::runtime_error("redis_client: cannot allocate a context for " + where);
  if (c->err != 0) throw std::runtime_error("redis_client: cannot connect to " + where + ": " + c->errstr);
  if (redisSetTimeout(c.get(), tv) != REDIS_OK) {
    throw std::runtime_error("redis_client: cannot set timeout on " + where + ": " + c->errstr);
  }
  ctx_ = std::move(c);
  if (!password_.empty()) {
    auto r = command({"AUTH", password_});
    if (r.type == reply::kind::error) {
      ctx_.reset();
      throw std::runtime_error("redis_client: AUTH to " + where + " failed: " + r.str);
    }
  }
}

redis_client::reply redis_client::command(const std::vector<std::string>& argv) {
  if (!ctx_) connect();
  std::vector<const char*> args;
  std::vector<std::size_t> lens;
  for (auto& a : argv) {
    args.push_back(a.c_str());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(ctx_.get(), static_cast<int>(args.size()), args.data(), lens.data()));
  if (r == nullptr) {
    // The context is unusable after an I/O error: drop it, reconnect next time.
    std::string err = ctx_->errstr;
    ctx_.reset();
    throw std::runtime_error("redis_client: " + describe(argv) + " failed: " + err);
  }
  reply out = convert(r);
  freeReplyObject(r);
  return out;
}

std::optional<std::string> redis_client::get(const std::string& key) {
  auto r = command({"GET", key});
  if (r.type == reply::kind::nil) return std::nullopt;
  if (r.type != reply::kind::string) throw std::runtime_error("redis_client: GET " + key + ": " + r.str);
  return r.str;
}

namespace {
long long expect_integer(const redis_client::reply& r, const std::string& what) {
  if (r.type != redis_client::reply::kind::integer) {
    throw std::runtime_error("redis_client: " + what + " did not return an integer: " + r.str);
  }
  return r.integer;
}
}  // namespace

long long redis_client::pttl(const std::string& key) {
  return expect_integer(command({"PTTL", key}), "PTTL");
}

bool redis_client::exists(const std::string& key) {
  return expect_integer(command({"EXISTS", key}), "EXISTS") > 0;
}

long long redis_client::dbsize() {
  return expect_integer(command({"DBSIZE"}), "DBSIZE");
}

long long redis_client::calls(const std::string& cmd) {
  std::string name = cmd;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Line format: cmdstat_set:calls=3,usec=12,usec_per_call=4.00,...
  auto stats = info_field("commandstats", "cmdstat_" + name);
  const std::string prefix = "calls=";
  if (stats.rfind(prefix, 0) != 0) return 0;
  return std::stoll(stats.substr(prefix.size()));
}

void redis_client::reset_stats() {
  auto r = command({"CONFIG", "RESETSTAT"});
  if (r.type == reply::kind::error) throw std::runtime_error("redis_client: CONFIG RESETSTAT: " + r.str);
}

void redis_client::flushall() {
  auto r = command({"FLUSHALL"});
  if (r.type == reply::kind::error) throw std::runtime_error("redis_client: FLUSHALL: " + r.str);
}

std::string redis_client::info_field(const std::string& section, const std::string& field) {
  auto r = command({"INFO", section});
  if (r.type != reply::kind::string) throw std::runtime_error("redis_client: INFO " + section + ": " + r.str);
  std::istringstream in(r.str);
  const std::string prefix = field + ":";
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return {};
}

}  // namespace redsync::test
