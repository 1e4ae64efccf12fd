#include "node_probe.hpp"

#include "tls_failure.hpp"
#include "tls_link.hpp"

#include <redsync/options.hpp>

#include <hiredis/hiredis.h>

#include <memory>
#include <thread>

namespace redsync::cli {
namespace {

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((d.count() % 1000) * 1000);
  return tv;
}

probe_reply convert(const redisReply& r) {
  probe_reply out;
  switch (r.type) {
    case REDIS_REPLY_STATUS:
      out.type = probe_reply::kind::status;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = probe_reply::kind::error;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STRING:
      out.type = probe_reply::kind::string;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = probe_reply::kind::integer;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_NIL: out.type = probe_reply::kind::nil; break;
    case REDIS_REPLY_ARRAY:
      out.type = probe_reply::kind::array;
      for (std::size_t i = 0; i < r.elements; ++i) out.elements.push_back(convert(*r.element[i]));
      break;
    default: out.type = probe_reply::kind::other; break;
  }
  return out;
}

std::string io_error(const redisContext* c) {
  return c != nullptr && c->errstr[0] != '\0' ? std::string(c->errstr) : std::string("I/O error");
}

// A blocking connection to one node: hiredis' own for TCP and unix sockets,
// a tls_link for rediss:// (hiredis 0.14 has no TLS).
class probe_link {
 public:
  probe_link(const node_options& node, std::chrono::milliseconds timeout) {
    if (node.tls.enabled) {
      tls_ = std::make_unique<tls_link>(node, timeout);
      if (!tls_->ok()) error_ = tls_->error();
      return;
    }
    const timeval tv = to_timeval(timeout);
    plain_.reset(node.unix_path.empty() ? redisConnectWithTimeout(node.host.c_str(), node.port, tv)
                                        : redisConnectUnixWithTimeout(node.unix_path.c_str(), tv));
    if (!plain_ || plain_->err != 0 || redisSetTimeout(plain_.get(), tv) != REDIS_OK)
      error_ = io_error(plain_.get());
  }

  // Why connecting failed; empty when connected.
  const std::string& connect_error() const { return error_; }

  void append(const std::vector<std::string>& argv) {
    if (tls_) {
      tls_->append(argv);
      return;
    }
    std::vector<const char*> args;
    std::vector<size_t> lens;
    for (const auto& a : argv) {
      args.push_back(a.c_str());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(plain_.get(), static_cast<int>(args.size()), args.data(), lens.data());
  }

  // The next reply; nullptr on I/O failure (error() says why).
  reply_ptr next() {
    if (tls_) return reply_ptr(tls_->read_reply());
    void* raw = nullptr;
    if (redisGetReply(plain_.get(), &raw) != REDIS_OK) return nullptr;
    return reply_ptr(static_cast<redisReply*>(raw));
  }

  // Sends argv and reads its reply.
  reply_ptr command(const std::vector<std::string>& argv) {
    append(argv);
    return next();
  }

  std::string error() const { return tls_ ? tls_->error() : io_error(plain_.get()); }

 private:
  context_ptr plain_;
  std::unique_ptr<tls_link> tls_;
  std::string error_;
};

std::chrono::microseconds elapsed_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
}

// A connection failure that retrying cannot fix, worded with what to do: a
// failed certificate verification, or a plaintext URI for a TLS port (which
// resets the connection or closes it: asked again over TLS, it answers).
void explain(const node_options& node, std::chrono::milliseconds timeout, probe_result& out) {
  if (!node.tls.enabled && may_be_tls_port(out.error) && speaks_tls(node, timeout))
    out.error = plaintext_to_tls(node, out.error);
  if (is_tls_refusal(out.error)) {
    out.error = with_tls_hint(out.error);
    out.tls_refused = true;
  }
}

void probe_one(const node_options& node, const std::vector<std::vector<std::string>>& commands,
               std::chrono::milliseconds timeout, probe_result& out) {
  probe_link c(node, timeout);
  if (!c.connect_error().empty()) {
    out.error = c.connect_error();
    explain(node, timeout, out);
    return;
  }
  std::vector<std::vector<std::string>> handshake;
  if (!node.password.empty()) {
    if (node.username.empty()) {
      handshake.push_back({"AUTH", node.password});
    } else {
      handshake.push_back({"AUTH", node.username, node.password});
    }
  }
  if (node.db != 0) handshake.push_back({"SELECT", std::to_string(node.db)});
  for (const auto& argv : handshake) {
    reply_ptr r = c.command(argv);
    if (!r) {
      out.error = c.error();
      explain(node, timeout, out);
      return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      out.error = argv[0] + ": " + std::string(r->str, r->len);
      out.refused = argv[0] == "AUTH";
      return;
    }
  }
  for (const auto& argv : commands) c.append(argv);
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < commands.size(); ++i) {
    reply_ptr r = c.next();
    if (!r) {
      out.error = c.error();
      out.replies.clear();
      explain(node, timeout, out);
      return;
    }
    if (i == 0) out.first_reply = elapsed_since(start);
    out.replies.push_back(convert(*r));
  }
  out.round_trip = elapsed_since(start);
  // A server that needs a password refuses every command: that is the
  // node's answer, not one command's.
  for (const auto& r : out.replies) {
    if (r.type == probe_reply::kind::error &&
        (r.str.starts_with("NOAUTH") || r.str.find("unauthenticated") != std::string::npos)) {
      out.error =
          "NOAUTH: the server requires a password; give it in the node URI, "
          "redis://[USER:]PASSWORD@HOST:PORT";
      out.refused = true;
      out.replies.clear();
      return;
    }
  }
  out.up = true;
}

}  // namespace

std::vector<probe_result> probe_all(const std::vector<std::string>& uris,
                                    const std::vector<std::vector<std::string>>& commands,
                                    std::chrono::milliseconds timeout) {
  std::vector<node_options> nodes;
  for (const auto& uri : uris) nodes.push_back(node_options::parse(uri));
  return probe_nodes(nodes, commands, timeout);
}

std::vector<probe_result> probe_nodes(const std::vector<node_options>& nodes,
                                      const std::vector<std::vector<std::string>>& commands,
                                      std::chrono::milliseconds timeout) {
  std::vector<probe_result> results(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) results[i].address = nodes[i].address();
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      threads.emplace_back([&, i] { probe_one(nodes[i], commands, timeout, results[i]); });
    }
  }  // jthreads join here
  return results;
}

}  // namespace redsync::cli
