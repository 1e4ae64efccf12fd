// Command-line parsing for the redsync tool: options, durations and numbers
// (node lists: node_list.hpp). Every error is a usage_error whose message
// names the option and the bad value. Hand-written rather than CLI11: docs/cli-parser.md has the
// measurements (CLI11's messages are worse, the saving is 30 lines).
#pragma once

#include <chrono>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace redsync::cli {

/// Bad usage; what() is one line without the "redsync: " prefix, e.g.
/// `--ttl: invalid duration "8x"`.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One option a command accepts: `--long_name`, optionally `-s`.
struct option_spec {
  std::string_view long_name;  ///< without the leading "--"
  char short_name = 0;         ///< 0 = none
  bool takes_value = false;    ///< `--name VALUE` or `--name=VALUE`
};

/// The arguments of one command, split up.
struct parsed_args {
  /// (long name, value) in order of appearance; the value is empty for flags.
  std::vector<std::pair<std::string, std::string>> options;
  /// Arguments that are not options (before "--").
  std::vector<std::string> positionals;
  /// True when a "--" was seen.
  bool has_separator = false;
  /// Everything after the first "--", verbatim.
  std::vector<std::string> after_separator;

  /// True if the flag or option `name` was given.
  bool has(std::string_view name) const;
  /// How many times the flag or option `name` was given ("-vv" is twice).
  int count(std::string_view name) const;
  /// The value of the last `name` option, or nullptr.
  const std::string* last(std::string_view name) const;
};

/// Splits `args` (the arguments after the command name) by `specs`. Options
/// may appear anywhere before "--". Short flags combine as with getopt(3):
/// "-vv", "-qv"; one that takes a value ends the cluster and takes its rest
/// ("-cCMD") or the next argument ("-qc CMD"). Throws usage_error for an
/// unknown option, a missing value or a value given to a flag.
parsed_args parse_args(std::span<char* const> args, std::span<const option_spec> specs);

/// Parses `0`, `250ms`, `8s`, `1.5s`, `2m`, `10h`, and a bare number of
/// seconds (`5`, `0.5`). `what` names the option in the error, e.g. "--ttl".
/// Rejects negative values, other units, values that are not a whole number
/// of milliseconds, and values over 7 days.
std::chrono::milliseconds parse_duration(std::string_view what, std::string_view text);

/// Parses a decimal integer in [min, max].
int parse_int(std::string_view what, std::string_view text, int min, int max);

/// Parses a decimal floating-point number (no exponent, no sign), e.g. "0.01".
double parse_double(std::string_view what, std::string_view text);

}  // namespace redsync::cli
