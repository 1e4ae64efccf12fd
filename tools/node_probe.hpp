// One-shot blocking queries to every node at once, for `status` and `ping`.
// Each node gets its own thread and a hiredis blocking connection whose
// connect and command timeouts are bounded, so a hung or stopped node costs
// at most about two timeouts and never hangs the tool.
#pragma once

#include <redsync/options.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace redsync::cli {

/// One reply, reduced to what the tool prints.
struct probe_reply {
  enum class kind { status, error, string, integer, nil, array, other } type = kind::nil;
  std::string str;                    ///< status, error and string replies
  long long integer = 0;              ///< integer replies
  std::vector<probe_reply> elements;  ///< array replies
};

/// What one node answered.
struct probe_result {
  std::string address;  ///< "host:port" or "unix:/path", as the library prints it
  bool up = false;      ///< connected, authenticated and answered every command
  std::string error;    ///< why not, when !up
  /// When !up: the node refused the credentials (AUTH failed, or NOAUTH: it
  /// needs a password and the URI gives none).
  bool refused = false;
  /// When !up: a TLS failure that retrying cannot fix (certificate
  /// verification, a client certificate demanded, a redis:// URI that
  /// reaches a TLS port); `error` says what to do (tls_failure.hpp).
  bool tls_refused = false;
  std::vector<probe_reply> replies;  ///< one per command, when up
  /// From sending the commands (after connecting and authenticating) to the
  /// first reply, and to the last.
  std::chrono::microseconds first_reply{0};
  std::chrono::microseconds round_trip{0};
};

/// Connects to every node in `uris` in parallel (AUTH and SELECT as the URI
/// says), pipelines `commands` and collects the replies. `timeout` bounds the
/// connect and each read. A node that answers NOAUTH is not up (refused).
/// Results are in node order.
std::vector<probe_result> probe_all(const std::vector<std::string>& uris,
                                    const std::vector<std::vector<std::string>>& commands,
                                    std::chrono::milliseconds timeout);

/// probe_all for nodes already parsed (a cluster member's seeds or masters).
std::vector<probe_result> probe_nodes(const std::vector<node_options>& nodes,
                                      const std::vector<std::vector<std::string>>& commands,
                                      std::chrono::milliseconds timeout);

}  // namespace redsync::cli
