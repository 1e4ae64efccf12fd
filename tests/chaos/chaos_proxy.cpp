// chaos_proxy: the fault-injection suite's TCP proxies in one process, driven
// over stdin by scripts/chaos.
//
//   chaos_proxy LISTEN_PORT:TARGET_PORT [LISTEN_PORT:TARGET_PORT ...]
//
// Starts one tcp_proxy per argument (listen port 0 = a free port) on
// 127.0.0.1, prints `proxy N PORT` for each (N from 1, PORT the listening
// port), then `ready`. Then answers each stdin line with one line, `ok` or
// `error <reason>`:
//
//   N normal | N delay MS JITTER_MS | N stall | N drop | N refuse on|off
//   N target PORT | N stats   (answers `ok accepted=A up=B down=C`)
//
// Exits 0 at the end of stdin, 2 on bad arguments, 1 when a port cannot be
// listened on, and dies with its parent (SIGTERM).
#include <sys/prctl.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tcp_proxy.hpp"

using redsync::test::tcp_proxy;

namespace {

std::optional<long> parse_number(std::string_view text, long min, long max) {
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max)
    return std::nullopt;
  return value;
}

struct port_pair {
  int listen = 0;
  int target = 0;
};

std::optional<port_pair> parse_pair(std::string_view arg) {
  const auto colon = arg.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto listen = parse_number(arg.substr(0, colon), 0, 65535);
  const auto target = parse_number(arg.substr(colon + 1), 1, 65535);
  if (!listen || !target) return std::nullopt;
  return port_pair{static_cast<int>(*listen), static_cast<int>(*target)};
}

struct command_usage {
  std::size_t args;  // words after the verb
  const char* usage;
};
const std::map<std::string, command_usage> usages = {
    {"normal", {0, "N normal"}}, {"delay", {2, "N delay MS JITTER_MS"}}, {"stall", {0, "N stall"}},
    {"drop", {0, "N drop"}},     {"refuse", {1, "N refuse on|off"}},     {"target", {1, "N target PORT"}},
    {"stats", {0, "N stats"}},
};
constexpr long max_delay_ms = 3'600'000;

// One command line applied to the proxies; returns the answer line.
std::string run_command(const std::string& line, std::vector<std::unique_ptr<tcp_proxy>>& proxies) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return "error empty command";
  const auto n = parse_number(words[0], 1, static_cast<long>(proxies.size()));
  if (!n) return "error no proxy " + words[0] + " (there are " + std::to_string(proxies.size()) + ")";
  if (words.size() < 2) return "error missing command after " + words[0];
  tcp_proxy& proxy = *proxies[static_cast<std::size_t>(*n - 1)];
  const std::string& verb = words[1];
  const auto known = usages.find(verb);
  if (known == usages.end()) return "error unknown command \"" + verb + "\"";
  if (words.size() - 2 != known->second.args) return std::string("error usage: ") + known->second.usage;
  using std::chrono::milliseconds;

  if (verb == "normal") {
    proxy.normal();
  } else if (verb == "delay") {
    const auto ms = parse_number(words[2], 0, max_delay_ms);
    const auto jitter = parse_number(words[3], 0, max_delay_ms);
    if (!ms || !jitter) return "error MS and JITTER_MS must be in 0..3600000";
    proxy.delay(milliseconds(*ms), milliseconds(*jitter));
  } else if (verb == "stall") {
    proxy.stall();
  } else if (verb == "drop") {
    proxy.drop_connections();
  } else if (verb == "refuse") {
    if (words[2] != "on" && words[2] != "off") return "error usage: N refuse on|off";
    proxy.refuse(words[2] == "on");
  } else if (verb == "target") {
    const auto port = parse_number(words[2], 1, 65535);
    if (!port) return "error PORT must be in 1..65535";
    proxy.retarget(static_cast<int>(*port));
  } else if (verb == "stats") {
    const auto s = proxy.stats();
    return "ok accepted=" + std::to_string(s.accepted) + " up=" + std::to_string(s.bytes_up) +
           " down=" + std::to_string(s.bytes_down);
  }
  return "ok";
}

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  // Die with the parent (scripts/chaos); check it did not die already.
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) return 1;
  // A reader that went away makes writes fail, not kill us.
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<port_pair> pairs;
  for (int i = 1; i < argc; ++i) {
    const auto pair = parse_pair(argv[i]);
    if (!pair) {
      std::fprintf(stderr, "chaos_proxy: bad argument \"%s\" (want LISTEN_PORT:TARGET_PORT)\n", argv[i]);
      pairs.clear();
      break;
    }
    pairs.push_back(*pair);
  }
  if (pairs.empty()) {
    std::fputs("usage: chaos_proxy LISTEN_PORT:TARGET_PORT [LISTEN_PORT:TARGET_PORT ...]\n", stderr);
    return 2;
  }

  std::vector<std::unique_ptr<tcp_proxy>> proxies;
  try {
    for (const auto& p : pairs) proxies.push_back(std::make_unique<tcp_proxy>(p.target, p.listen));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos_proxy: %s\n", e.what());
    return 1;
  }
  for (std::size_t i = 0; i < proxies.size(); ++i)
    say("proxy " + std::to_string(i + 1) + " " + std::to_string(proxies[i]->port()));
  say("ready");

  for (std::string line; std::getline(std::cin, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    say(run_command(line, proxies));
  }
  return 0;
}
