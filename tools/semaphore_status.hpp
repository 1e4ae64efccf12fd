// `redsync status NAME` for a semaphore (lock -n K NAME): the permits each
// node holds for it (id, slot, time left), the k the nodes store, and on
// how many nodes each permit is. A cluster member is read on the master that
// serves the name's slot, in the cluster key layout (member_probe.hpp).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace redsync::cli {

/// Whether NAME is a semaphore on these nodes: some node holds a permit of
/// it and no node's lock key holds anything but the permits' mark (a name
/// held as a mutex on some node shows the mutex; -n shows the semaphore).
bool is_semaphore(const std::vector<std::string>& uris, const std::string& name,
                  std::chrono::milliseconds timeout);

/// Prints the semaphore's state (as JSON with `json`); `permits` is the K of
/// -n, compared with the k the nodes store. Returns the exit status, as
/// `status` does for a mutex: ok when a quorum of nodes answered.
int semaphore_status(const std::vector<std::string>& uris, const std::string& name,
                     std::chrono::milliseconds timeout, std::optional<int> permits, bool json);

}  // namespace redsync::cli
