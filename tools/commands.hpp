// The tool's commands. Each takes the arguments after its name and returns
// the process exit status (see exit_status.hpp); usage errors are thrown as
// usage_error and reported by main().
#pragma once

#include <span>

namespace redsync::cli {

int run_lock(std::span<char* const> args);
int run_status(std::span<char* const> args);
int run_ping(std::span<char* const> args);

}  // namespace redsync::cli
