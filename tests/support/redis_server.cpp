#include "redis_server.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace redsync::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto start_bound = 10s;
constexpr auto signal_bound = 5s;
constexpr auto poll_interval = 2ms;
constexpr int port_retries = 5;

// ---- registry of live children ----------------------------------------------
// Every signal and every waitpid goes through here, so a PID that has been
// reaped (by its owner or by kill_all_servers) is never signalled again: once
// reaped, the number may belong to an unrelated process.
struct registry {
  std::mutex mutex;
  std::set<pid_t> pids;
};

registry& children() {
  static auto* r = new registry;  // leaked on purpose: used from atexit/terminate
  return *r;
}

void add_child(pid_t pid) {
  std::lock_guard lock(children().mutex);
  children().pids.insert(pid);
}

// Sends sig only to a registered (not yet reaped) child.
bool signal_child(pid_t pid, int sig) {
  std::lock_guard lock(children().mutex);
  if (children().pids.count(pid) == 0) return false;
  return ::kill(pid, sig) == 0;
}

// True when the child has exited and is now reaped (or was reaped before).
bool reap_child(pid_t pid, bool block) {
  std::lock_guard lock(children().mutex);
  if (children().pids.count(pid) == 0) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  children().pids.erase(pid);  // reaped, or ECHILD: either way it is gone
  return true;
}

// ---- helpers ----------------------------------------------------------------

std::string find_binary() {
  std::string name = "redis-server";
  if (const char* env = std::getenv("REDSYNC_REDIS_SERVER"); env != nullptr && *env != '\0') {
    name = env;
  }
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) {
      throw std::runtime_error("redis-server binary is not executable: " + name);
    }
    return name;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    std::string candidate = (d.empty() ? std::string(".") : d) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error("cannot find " + name + " on PATH (set REDSYNC_REDIS_SERVER to the binary)");
}

}  // namespace

// Asks the kernel for a free port. Racy by nature (someone may take it before
// redis binds); await_ready() retries with a new port when that happens.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("cannot find a free port: ") + std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {

std::string temp_base() {
  std::string base = "/tmp";
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') base = t;
  // A unix socket path must fit in sun_path (108 bytes).
  if (base.size() > 60) base = "/tmp";
  return base;
}

// Each directory records the test process that owns it, so a later run can
// remove the directories of a run that was SIGKILLed (its servers died with it
// through PDEATHSIG, but nothing could delete their files).
void remove_stale_dirs() noexcept {
  std::error_code ec;
  for (fs::directory_iterator it(temp_base(), ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind("redsync-test-", 0) != 0) continue;
    std::ifstream in(it->path() / "owner.pid");
    pid_t owner = 0;
    if (!(in >> owner) || owner <= 0) continue;
    if (::kill(owner, 0) == -1 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

std::string make_temp_dir() {
  std::string tmpl = temp_base() + "/redsync-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp(" + tmpl + "): " + std::strerror(errno));
  }
  std::ofstream(tmpl + "/owner.pid") << ::getpid() << "\n";
  return tmpl;
}

// State letter from /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or 0 if unreadable.
char proc_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  auto paren = line.rfind(')');  // the command name may contain spaces or ')'
  if (paren == std::string::npos || paren + 2 >= line.size()) return 0;
  return line[paren + 2];
}

std::string tail_of(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string l; std::getline(in, l);) {
    last.push_back(std::move(l));
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (auto& l : last) out += l + "\n";
  return out;
}

std::terminate_handler previous_terminate = nullptr;

void install_hooks() {
  static std::once_flag once;
  std::call_once(once, [] {
    remove_stale_dirs();
    std::atexit([] { kill_all_servers(); });
    previous_terminate = std::set_terminate([] {
      kill_all_servers();
      if (previous_terminate != nullptr) previous_terminate();
      std::abort();
    });
  });
}

template <class F>
bool poll_until(F cond, std::chrono::steady_clock::duration bound) {
  auto deadline = std::chrono::steady_clock::now() + bound;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return cond();
    std::this_thread::sleep_for(poll_interval);
  }
  return true;
}

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

reply_ptr run(redisContext* c, std::initializer_list<std::string> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (auto& a : args) {
    argv.push_back(a.c_str());
    lens.push_back(a.size());
  }
  return reply_ptr(
      static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

// True when the process listening on port is *our* pid and answers PING.
// Checking process_id guards against a port race where another server won.
bool answers_ping(int port, pid_t pid, const std::string& password) {
  timeval connect_timeout{0, 200'000};
  context_ptr c(redisConnectWithTimeout("127.0.0.1", port, connect_timeout));
  if (!c || c->err != 0) return false;
  timeval io_timeout{1, 0};
  redisSetTimeout(c.get(), io_timeout);
  if (!password.empty()) {
    auto r = run(c.get(), {"AUTH", password});
    if (!r || r->type == REDIS_REPLY_ERROR) return false;
  }
  auto info = run(c.get(), {"INFO", "server"});
  if (!info || info->type != REDIS_REPLY_STRING) return false;
  std::string text(info->str, info->len);
  if (text.find("process_id:" + std::to_string(pid) + "\r") == std::string::npos) return false;
  auto pong = run(c.get(), {"PING"});
  return pong && pong->type == REDIS_REPLY_STATUS && std::string(pong->str, pong->len) == "PONG";
}

}  // namespace

// ---- redis_server -----------------------------------------------------------

redis_server::redis_server(config cfg) : redis_server(std::move(cfg), deferred_tag{}) {
  // The delegated constructor has completed, so the destructor cleans up if this throws.
  await_ready(true);
}

redis_server::redis_server(config cfg, deferred_tag) : cfg_(std::move(cfg)) {
  install_hooks();
  binary_ = find_binary();
  dir_ = make_temp_dir();
  try {
    port_ = free_port();
    if (cfg_.tls) tls_port_ = free_port();
    launch();
  } catch (...) {
    cleanup();
    throw;
  }
}

redis_server::~redis_server() {
  cleanup();
}

void redis_server::cleanup() noexcept {
  if (pid_ > 0) {
    signal_child(pid_, SIGCONT);
    signal_child(pid_, SIGKILL);
    reap_child(pid_, true);
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

void redis_server::launch() {
  std::vector<std::string> args = {binary_,
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--daemonize",
                                   "no",
                                   "--dir",
                                   dir_,
                                   "--logfile",
                                   dir_ + "/redis.log"};
  if (cfg_.unix_socket) {
    args.insert(args.end(), {"--unixsocket", unix_path(), "--unixsocketperm", "700"});
  }
  if (!cfg_.password.empty()) args.insert(args.end(), {"--requirepass", cfg_.password});
  if (cfg_.tls) {
    args.insert(args.end(), {"--tls-port", std::to_string(tls_port_), "--tls-cert-file", cfg_.tls->cert_file,
                             "--tls-key-file", cfg_.tls->key_file, "--tls-ca-cert-file", cfg_.tls->ca_file,
                             "--tls-auth-clients", cfg_.tls->require_client_cert ? "yes" : "no"});
  }
  args.insert(args.end(), cfg_.extra_args.begin(), cfg_.extra_args.end());

  // Everything the child needs is prepared before fork: between fork and exec
  // only async-signal-safe calls are allowed (other threads may hold locks).
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Ours first: getenv takes the first entry of a name.
  std::vector<char*> envp;
  for (auto& e : cfg_.env) envp.push_back(e.data());
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(nullptr);
  std::string out_path = dir_ + "/stdout.log";
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || null_in < 0) {
    int err = errno;
    if (out >= 0) ::close(out);
    if (null_in >= 0) ::close(null_in);
    throw std::runtime_error("cannot open " + out_path + ": " + std::strerror(err));
  }
  long max_fd = ::sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // parent already gone
    ::dup2(null_in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    // Do not leak the test's sockets into redis: a client fd kept open by a
    // child would keep that connection alive after the test closes it.
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
#endif
    {
      for (long fd = 3; fd < max_fd; ++fd) ::close(static_cast<int>(fd));
    }
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &dfl, nullptr);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  int fork_errno = errno;
  ::close(out);
  ::close(null_in);
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  add_child(pid);
  pid_ = pid;
  launched_at_ = std::chrono::steady_clock::now();
}

void redis_server::await_ready(bool retry_port) {
  for (int attempt = 0;; ++attempt) {
    auto deadline = launched_at_ + start_bound;
    bool died = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (reap(false)) {
        died = true;
        break;
      }
      if (answers_ping(port_, pid_, cfg_.password)) return;
      std::this_thread::sleep_for(poll_interval);
    }
    std::string tail = log_tail();
    if (!died) {
      kill();
      throw std::runtime_error("redis-server on port " + std::to_string(port_) +
                               " did not answer PING within 10 s; log tail:\n" + tail);
    }
    bool port_taken = tail.find("in use") != std::string::npos;
    if (!(retry_port && port_taken && attempt < port_retries)) {
      throw std::runtime_error("redis-server exited during startup on port " + std::to_string(port_) +
                               "; log tail:\n" + tail);
    }
    port_ = free_port();
    if (cfg_.tls) tls_port_ = free_port();
    launch();
  }
}

bool redis_server::reap(bool block) const {
  if (pid_ <= 0) return true;
  if (!reap_child(pid_, block)) return false;
  pid_ = -1;
  return true;
}

std::string redis_server::address() const {
  return "127.0.0.1:" + std::to_string(port_);
}

std::string redis_server::uri() const {
  std::string auth = cfg_.password.empty() ? "" : ":" + cfg_.password + "@";
  return "redis://" + auth + address();
}

std::string redis_server::tls_uri(const std::string& query) const {
  if (!cfg_.tls) return {};
  std::string auth = cfg_.password.empty() ? "" : ":" + cfg_.password + "@";
  return "rediss://" + auth + "127.0.0.1:" + std::to_string(tls_port_) + query;
}

std::string redis_server::unix_path() const {
  return cfg_.unix_socket ? dir_ + "/redis.sock" : std::string();
}

std::string redis_server::unix_uri() const {
  if (!cfg_.unix_socket) return {};
  std::string auth = cfg_.password.empty() ? "" : ":" + cfg_.password + "@";
  return "unix://" + auth + unix_path();
}

std::string redis_server::log_tail(std::size_t lines) const {
  std::string out = tail_of(dir_ + "/redis.log", lines);
  std::string console = tail_of(dir_ + "/stdout.log", lines);
  if (!console.empty()) out += "--- stdout/stderr ---\n" + console;
  return out;
}

pid_t redis_server::pid() const {
  return running() ? pid_ : -1;
}

bool redis_server::running() const {
  return pid_ > 0 && !reap(false);
}

bool redis_server::paused() const {
  return running() && proc_state(pid_) == 'T';
}

void redis_server::kill() {
  if (pid_ <= 0) return;
  signal_child(pid_, SIGKILL);
  reap(true);
}

void redis_server::pause() {
  if (!running()) throw std::runtime_error("pause: redis-server on " + address() + " is not running");
  signal_child(pid_, SIGSTOP);
  if (!poll_until([&] { return proc_state(pid_) == 'T'; }, signal_bound)) {
    throw std::runtime_error("pause: redis-server on " + address() + " did not stop");
  }
}

void redis_server::resume() {
  if (!running()) throw std::runtime_error("resume: redis-server on " + address() + " is not running");
  signal_child(pid_, SIGCONT);
  if (!poll_until([&] { return proc_state(pid_) != 'T'; }, signal_bound)) {
    throw std::runtime_error("resume: redis-server on " + address() + " did not continue");
  }
}

void redis_server::restart() {
  kill();
  launch();
  await_ready(false);  // same port, by contract: no retry on another one
}

void redis_server::stop() {
  if (!running()) return;
  signal_child(pid_, SIGCONT);
  signal_child(pid_, SIGTERM);
  if (!poll_until([&] { return reap(false); }, signal_bound)) kill();
}

// ---- cluster ----------------------------------------------------------------

cluster::cluster(std::size_t n, config cfg) {
  servers_.reserve(n);
  // Launch all first, then wait: the servers boot concurrently.
  for (std::size_t i = 0; i < n; ++i) {
    servers_.push_back(std::unique_ptr<redis_server>(new redis_server(cfg, redis_server::deferred_tag{})));
  }
  for (auto& s : servers_) s->await_ready(true);
}

std::vector<std::string> cluster::uris() const {
  std::vector<std::string> out;
  for (auto& s : servers_) out.push_back(s->uri());
  return out;
}

std::vector<std::string> cluster::addresses() const {
  std::vector<std::string> out;
  for (auto& s : servers_) out.push_back(s->address());
  return out;
}

// ---- process-wide cleanup ---------------------------------------------------

void kill_all_servers() noexcept {
  std::lock_guard lock(children().mutex);
  for (pid_t pid : children().pids) {
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  children().pids.clear();
}

}  // namespace redsync::test
