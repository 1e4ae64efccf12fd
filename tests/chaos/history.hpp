// A client's history: one JSON object per line, appended with a single
// write(2) to a file opened O_APPEND, so that the lines of several processes
// sharing a file never interleave. Every line carries the monotonic time
// ("t", ns, CLOCK_MONOTONIC: the same clock in every process of the machine,
// and std::chrono::steady_clock's), the wall time ("w", ns), the pid, and a
// random process id ("proc") that, unlike the pid, is never reused in a run.
#pragma once

#include "json.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace redsync::chaos {

std::int64_t monotonic_ns();
std::int64_t to_ns(std::chrono::steady_clock::time_point t);

class history {
 public:
  // Opens (creates) `path` for appending; throws std::runtime_error naming it.
  history(const std::string& path, std::string client);
  ~history();
  history(const history&) = delete;
  history& operator=(const history&) = delete;

  // One event: `op` and the rest of the object's fields, already JSON
  // (`"ok":true,"token":3`), without braces; may be empty.
  void record(std::string_view op, std::string_view fields);

  // This process's random, non-zero 32-bit id.
  std::uint32_t proc_id() const noexcept { return proc_id_; }

 private:
  int fd_ = -1;
  std::uint32_t proc_id_ = 0;
  std::string client_;
};

// `s` as a JSON string literal, quotes included.
// `s` as a JSON string literal (the CLI's escaping: valid JSON for any bytes).
using redsync::cli::json_string;

}  // namespace redsync::chaos
