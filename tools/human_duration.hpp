// Durations as the tool prints them for people.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <string>

namespace redsync::cli {

/// "0.4 s", "12.5 s", "3 min 5 s", "2 h 10 min", "3 d 4 h".
inline std::string human_duration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms < 60'000) return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
  const long long s = ms / 1000;
  if (s < 3600) return fmt::format("{} min {} s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{} h {} min", s / 3600, s % 3600 / 60);
  return fmt::format("{} d {} h", s / 86400, s % 86400 / 3600);
}

}  // namespace redsync::cli
