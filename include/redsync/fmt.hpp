#pragma once

/// \file
/// {fmt} formatters for `redsync::errc`, `redsync::node_status`,
/// `redsync::result` and `redsync::fencing_token`, for applications that log with {fmt} (8 or later).
/// The one public header that includes a third-party header, so it is not
/// part of <redsync/redsync.hpp>: include it where you format.
///
/// \code
/// #include <redsync/fmt.hpp>
/// fmt::print("lock: {}\n", m.lock(ctx));          // result::describe()
/// fmt::print("{}\n", redsync::errc::busy);         // "busy"
/// fmt::print("token {}\n", m.token());             // "token 42"
/// \endcode

#include <redsync/error.hpp>
#include <redsync/fencing_token.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

/// Formats as `redsync::to_string(e)`; takes the format spec of a string.
template <>
struct fmt::formatter<redsync::errc> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(redsync::errc e, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(redsync::to_string(e), ctx);
  }
};

/// Formats as `redsync::to_string(s)`; takes the format spec of a string.
template <>
struct fmt::formatter<redsync::node_status> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(redsync::node_status s, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(redsync::to_string(s), ctx);
  }
};

/// Formats as `r.describe()`; takes the format spec of a string.
template <>
struct fmt::formatter<redsync::result> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const redsync::result& r, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(r.describe(), ctx);
  }
};

/// Formats as `t.value`; takes the format spec of an unsigned integer
/// (`{:>8}`, `{:x}`, ...).
template <>
struct fmt::formatter<redsync::fencing_token> : fmt::formatter<std::uint64_t> {
  template <class FormatContext>
  auto format(redsync::fencing_token t, FormatContext& ctx) const {
    return fmt::formatter<std::uint64_t>::format(t.value, ctx);
  }
};
