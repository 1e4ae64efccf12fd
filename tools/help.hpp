// Help texts of the redsync tool.
#pragma once

#include <string_view>

namespace redsync::cli {

/// `redsync --help`: the commands, the common options and the exit statuses.
extern const std::string_view main_help;
/// `redsync lock --help`.
extern const std::string_view lock_help;
/// `redsync status --help`.
extern const std::string_view status_help;
/// `redsync ping --help`.
extern const std::string_view ping_help;

}  // namespace redsync::cli
