#include "args.hpp"

#include <redsync/error.hpp>
#include <redsync/options.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

namespace redsync::cli {
namespace {

const option_spec* find_long(std::span<const option_spec> specs, std::string_view name) {
  for (const auto& s : specs) {
    if (s.long_name == name) return &s;
  }
  return nullptr;
}

const option_spec* find_short(std::span<const option_spec> specs, char c) {
  for (const auto& s : specs) {
    if (s.short_name != 0 && s.short_name == c) return &s;
  }
  return nullptr;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// No duration on the command line needs more than a few days; the bound keeps
// the arithmetic below far from overflow.
constexpr std::int64_t max_duration_ms = std::int64_t{7} * 24 * 3600 * 1000;

}  // namespace

bool parsed_args::has(std::string_view name) const {
  return last(name) != nullptr;
}

int parsed_args::count(std::string_view name) const {
  int n = 0;
  for (const auto& option : options) n += option.first == name ? 1 : 0;
  return n;
}

const std::string* parsed_args::last(std::string_view name) const {
  const std::string* found = nullptr;
  for (const auto& [n, v] : options) {
    if (n == name) found = &v;
  }
  return found;
}

parsed_args parse_args(std::span<char* const> args, std::span<const option_spec> specs) {
  parsed_args out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--") {
      out.has_separator = true;
      out.after_separator.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      out.positionals.emplace_back(arg);
      continue;
    }
    // A value comes from "--name=VALUE", from the rest of a short-flag
    // cluster ("-cCMD"), or else from the next argument.
    const auto take_value = [&](const option_spec& spec, std::string_view rest, bool has_rest) {
      if (has_rest) {
        out.options.emplace_back(spec.long_name, std::string(rest));
      } else if (i + 1 < args.size()) {
        out.options.emplace_back(spec.long_name, std::string(args[++i]));
      } else {
        throw usage_error(fmt::format("--{}: missing value", spec.long_name));
      }
    };
    if (arg.starts_with("--")) {
      std::string_view name = arg.substr(2);
      std::string_view inline_value;
      bool has_inline = false;
      if (auto eq = name.find('='); eq != std::string_view::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_inline = true;
      }
      const option_spec* spec = find_long(specs, name);
      if (spec == nullptr) throw usage_error(fmt::format("unknown option \"{}\"", arg));
      if (spec->takes_value) {
        take_value(*spec, inline_value, has_inline);
      } else if (has_inline) {
        throw usage_error(fmt::format("--{}: takes no value", spec->long_name));
      } else {
        out.options.emplace_back(spec->long_name, std::string());
      }
      continue;
    }
    // Short flags, alone or combined as getopt(3) does: "-vv", "-qv", and a
    // flag that takes a value ends the cluster ("-qc CMD", "-cCMD").
    for (std::size_t k = 1; k < arg.size(); ++k) {
      const option_spec* spec = find_short(specs, arg[k]);
      if (spec == nullptr) {
        if (arg.size() == 2) throw usage_error(fmt::format("unknown option \"{}\"", arg));
        throw usage_error(fmt::format("unknown option \"-{}\" in \"{}\"", arg[k], arg));
      }
      if (spec->takes_value) {
        take_value(*spec, arg.substr(k + 1), k + 1 < arg.size());
        break;
      }
      out.options.emplace_back(spec->long_name, std::string());
    }
  }
  return out;
}

std::chrono::milliseconds parse_duration(std::string_view what, std::string_view text) {
  const auto invalid = [&](std::string_view why) {
    return usage_error(fmt::format("{}: invalid duration \"{}\"{}{} (use e.g. 5, 250ms, 8s, 1.5s, 2m, 10h)",
                                   what, text, why.empty() ? "" : ": ", why));
  };
  if (text == "0") return std::chrono::milliseconds{0};
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  const std::string_view whole = text.substr(0, i);
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const std::size_t start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(start, i - start);
    if (fraction.empty()) throw invalid("");
  }
  if (whole.empty() || whole.size() > 9 || fraction.size() > 9) throw invalid("");
  const std::string_view unit = text.substr(i);
  std::int64_t scale = 0;             // milliseconds per unit
  if (unit.empty() || unit == "s") {  // a bare number is seconds, as sleep(1) and timeout(1) read it
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else {
    throw invalid("");
  }
  std::int64_t w = 0;
  std::from_chars(whole.data(), whole.data() + whole.size(), w);
  // The fraction, as an exact rational f / 10^digits of one unit.
  std::int64_t f = 0;
  std::int64_t denom = 1;
  for (char c : fraction) {
    f = f * 10 + (c - '0');
    denom *= 10;
  }
  if ((f * scale) % denom != 0) throw invalid("not a whole number of milliseconds");
  const std::int64_t ms = w * scale + f * scale / denom;
  if (ms > max_duration_ms) throw invalid("too large");
  return std::chrono::milliseconds{ms};
}

int parse_int(std::string_view what, std::string_view text, int min, int max) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < min || v > max) {
    throw usage_error(
        fmt::format("{}: invalid number \"{}\" (expected an integer in [{}, {}])", what, text, min, max));
  }
  return v;
}

double parse_double(std::string_view what, std::string_view text) {
  const auto invalid = [&] { return usage_error(fmt::format("{}: invalid number \"{}\"", what, text)); };
  bool digits = false;
  bool dot = false;
  for (char c : text) {
    if (is_digit(c)) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      throw invalid();
    }
  }
  if (!digits || text.size() > 32) throw invalid();
  // strtod on a validated, NUL-terminated copy: std::from_chars for double
  // needs a newer libstdc++ than every compiler here ships.
  const std::string copy(text);
  return std::strtod(copy.c_str(), nullptr);
}

}  // namespace redsync::cli
