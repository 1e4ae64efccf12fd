#pragma once

// What the fuzz targets share: a check that turns a broken property into a
// crash libFuzzer keeps (an abort, with the reason on stderr).

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace redsync::fuzz {

inline void check(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

}  // namespace redsync::fuzz
