// redsync: a distributed flock(1) over Redlock.
//
//   redsync lock [options] NAME -- COMMAND [ARGS...]
//   redsync lock [options] NAME -c STRING
//   redsync lock [options] NAME            (hold mode: until a signal)
//   redsync lock -n K [options] NAME ...   (a permit of the semaphore NAME)
//   redsync status [options] NAME
//   redsync ping [options]
//   redsync help | --help | -h ; redsync --version
//
// Exit statuses (also in `redsync --help`). They sit in the sysexits(3)
// range, which ordinary commands rarely use, or follow the shell convention;
// each failure that needs a different remedy has its own:
//   0..255  lock: the command's own status; 128+N if signal N killed it
//   0       lock in hold mode: released after a signal; status: a quorum
//           of nodes answered; ping: every node is up
//   1       ping: some nodes are down, but a quorum is up
//   64      usage or configuration error (EX_USAGE): a bad option, value,
//           duration or node URI; the message names it; lock -n K: the
//           nodes store another K for the semaphore
//   69      nodes unavailable (EX_UNAVAILABLE): lock could not acquire
//           because too few nodes were reachable or voting for a quorum
//           (down, timing out, held back by the restart guard, unverified,
//           loading); status/ping: fewer than a quorum of nodes answered.
//           Waiting longer may help.
//   70      internal error (EX_SOFTWARE)
//   75      lock could not be acquired within --wait / --tries because
//           another holder has it, or every permit is held (EX_TEMPFAIL):
//           try again later
//   76      lock: nodes answer every attempt with an error retrying cannot
//           fix (WRONGTYPE, READONLY, ...), on more nodes than a quorum can
//           spare (EX_PROTOCOL): an operator must fix the nodes
//   77      authentication or permission refused (NOAUTH, WRONGPASS,
//           NOPERM) by more nodes than a quorum can spare (EX_NOPERM): fix
//           the credentials or the ACL
//   79      the lock was lost while the command ran (or while held in hold
//           mode), or was about to run out with no extension (the tool
//           stopped); the command's process group was sent SIGTERM (then
//           SIGKILL after --kill-grace, or just before the lock's validity
//           ended)
//   126     the command exists but cannot be executed
//   127     the command was not found
//   128+N   lock: the tool was interrupted by signal N while acquiring

#include "args.hpp"
#include "commands.hpp"
#include "exit_status.hpp"
#include "help.hpp"

#include <redsync/error.hpp>

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#ifndef REDSYNC_CLI_VERSION
#define REDSYNC_CLI_VERSION "unknown"
#endif

namespace {

using namespace redsync::cli;

void print_help(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

// The library's configuration errors name its fields; the user typed
// options. The tool checks its options before handing them on, so this is a
// safety net for a rule it does not know about.
std::string in_tool_terms(std::string message) {
  constexpr std::pair<std::string_view, std::string_view> names[] = {
      {"mutex_options.expiry", "--ttl"},
      {"mutex_options.tries", "--tries"},
      {"mutex_options.drift_factor", "--drift-factor"},
      {"mutex_options.auto_extend_interval", "the extension interval (--ttl / 3)"},
      {"mutex name", "lock NAME"},
      {"node_options.tls.ca_file", "--tls-ca (or ca=)"},
      {"node_options.tls.ca_dir", "--tls-ca-dir (or ca_dir=)"},
      {"node_options.tls.cert_file", "--tls-cert (or cert=)"},
      {"node_options.tls.key_file", "--tls-key (or key=)"},
      {"node_options", "--nodes"},
  };
  for (const auto& [field, option] : names) {
    for (auto at = message.find(field); at != std::string::npos;
         at = message.find(field, at + option.size())) {
      message.replace(at, field.size(), option);
    }
  }
  return message;
}

void print_error(std::string_view message) {
  fmt::print(stderr, "redsync: {}\n", message);
  std::fflush(stderr);
}

int dispatch(std::span<char* const> args) {
  if (args.empty()) {
    print_error("missing command (lock, status, ping or help; see redsync --help)");
    return exit_status::usage;
  }
  const std::string_view command = args[0];
  const auto rest = args.subspan(1);
  if (command == "lock") return run_lock(rest);
  if (command == "status" || command == "ping") {
    // status and ping write to nodes that may have gone away: that must be
    // an error return, not death by SIGPIPE. (Not for lock: its command
    // would inherit the ignored disposition, and the library's loop thread
    // already blocks SIGPIPE.)
    std::signal(SIGPIPE, SIG_IGN);
    return command == "status" ? run_status(rest) : run_ping(rest);
  }
  if (command == "help" || command == "--help" || command == "-h") {
    const std::string_view topic = rest.empty() ? "" : std::string_view(rest[0]);
    if (topic == "lock") {
      print_help(lock_help);
    } else if (topic == "status") {
      print_help(status_help);
    } else if (topic == "ping") {
      print_help(ping_help);
    } else if (topic.empty()) {
      print_help(main_help);
    } else {
      throw usage_error(fmt::format("help: unknown command \"{}\"", topic));
    }
    return exit_status::ok;
  }
  if (command == "--version" || command == "version") {
    fmt::print("redsync {}\n", REDSYNC_CLI_VERSION);
    return exit_status::ok;
  }
  if (command.starts_with("-")) throw usage_error(fmt::format("unknown option \"{}\"", command));
  throw usage_error(fmt::format("unknown command \"{}\" (lock, status, ping or help)", command));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(std::span<char* const>(argv + 1, static_cast<std::size_t>(argc > 0 ? argc - 1 : 0)));
  } catch (const usage_error& e) {
    print_error(e.what());
    return exit_status::usage;
  } catch (const redsync::config_error& e) {
    print_error(in_tool_terms(e.what()));
    return exit_status::usage;
  } catch (const std::exception& e) {
    print_error(fmt::format("internal error: {}", e.what()));
    return exit_status::software;
  }
}
