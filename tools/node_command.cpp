#include "node_command.hpp"

#include <string>

namespace redsync::cli {

std::chrono::milliseconds probe_timeout(const parsed_args& args) {
  std::chrono::milliseconds timeout{1000};
  if (const std::string* t = args.last("timeout")) {
    timeout = parse_duration("--timeout", *t);
    if (timeout.count() == 0) throw usage_error("--timeout: must be greater than 0");
  }
  return timeout;
}

std::chrono::milliseconds vote_ttl(const parsed_args& args) {
  std::chrono::milliseconds ttl{8000};
  if (const std::string* t = args.last("ttl")) ttl = parse_duration("--ttl", *t);
  return ttl;
}

}  // namespace redsync::cli
