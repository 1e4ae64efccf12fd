#pragma once

// Lock names that no other test (or test process) uses.

#include <unistd.h>

#include <atomic>
#include <string>

namespace redsync::test {

inline std::string unique_name(const char* base) {
  static std::atomic<int> n{0};
  return std::string(base) + ":" + std::to_string(n.fetch_add(1)) + ":" + std::to_string(getpid());
}

}  // namespace redsync::test
