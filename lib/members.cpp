// parse_members and members_from_env: the one place a comma-separated list
// of members is split (the tool's --nodes and REDSYNC_NODES, the examples,
// the test clients). Messages name a member by its place in the list and
// show a URI only through member_options::parse, never the list's text:
// that holds the passwords of every node.

#include <redsync/error.hpp>
#include <redsync/members.hpp>
#include <redsync/options.hpp>

#include "util/ascii.hpp"
#include "util/cluster_uri.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace redsync {
namespace {

constexpr std::string_view list_blanks = " \t";

std::string_view trim_left_blanks(std::string_view s) {
  const std::size_t first = s.find_first_not_of(list_blanks);
  return first == std::string_view::npos ? std::string_view{} : s.substr(first);
}

std::string_view trim_right_blanks(std::string_view s) {
  const std::size_t last = s.find_last_not_of(list_blanks);
  return last == std::string_view::npos ? std::string_view{} : s.substr(0, last + 1);
}

// Whether `piece` (without its leading blanks) starts a member of its own:
// a scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.')
// followed by "://", or the "unix:" of a short unix socket URI. "b:2" or
// "b:2?ca=http://x" do not.
bool starts_member(std::string_view piece) {
  if (detail::starts_with_nocase(piece, "unix:")) return true;
  const std::size_t end = piece.find("://");
  if (end == std::string_view::npos || end == 0) return false;
  for (std::size_t i = 0; i < end; ++i) {
    const char c = detail::ascii_lower(piece[i]);
    const bool letter = c >= 'a' && c <= 'z';
    if (!letter && (i == 0 || !((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))) return false;
  }
  return true;
}

// One member of a list: its comma-separated pieces as written.
struct list_member {
  std::vector<std::string_view> pieces;
  bool cluster = false;
};

std::vector<list_member> group_pieces(std::string_view list) {
  std::vector<list_member> members;
  for (std::size_t start = 0;;) {
    const std::size_t comma = list.find(',', start);
    const std::string_view piece =
        list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::string_view text = trim_left_blanks(piece);
    if (!members.empty() && members.back().cluster && !text.empty() && !starts_member(text)) {
      members.back().pieces.push_back(piece);  // one more seed (or a password's rest)
    } else {
      members.push_back({{piece}, detail::is_cluster_uri(text)});
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return members;
}

// The member's URI: its pieces joined by ',', without the blanks around
// it or around a seed. Blanks next to a ',' inside the user info (which
// ends at the last '@', as the URI parsers read it) are a password's own.
std::string member_text(const list_member& m) {
  std::size_t last_at = std::string_view::npos;
  for (std::size_t i = 0; i < m.pieces.size(); ++i) {
    if (m.pieces[i].find('@') != std::string_view::npos) last_at = i;
  }
  std::string out;
  for (std::size_t i = 0; i < m.pieces.size(); ++i) {
    std::string_view piece = m.pieces[i];
    if (i == 0 || last_at == std::string_view::npos || i > last_at) piece = trim_left_blanks(piece);
    if (last_at == std::string_view::npos || i >= last_at) piece = trim_right_blanks(piece);
    if (i > 0) out += ',';
    out += piece;
  }
  return out;
}

[[noreturn]] void fail_member(std::size_t k, std::size_t n, std::string_view why) {
  if (n == 1) throw config_error(std::string(why));
  throw config_error(fmt::format("node URI {} of {}: {}", k, n, why));
}

}  // namespace

std::vector<std::string> parse_members(std::string_view list) {
  const std::vector<list_member> members = group_pieces(list);
  const std::size_t n = members.size();
  std::vector<std::string> texts;
  texts.reserve(n);
  for (const list_member& m : members) texts.push_back(member_text(m));
  if (n == 1 && texts[0].empty())
    throw config_error("the list of node URIs is empty (expected URIs separated by ',')");
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = i + 1;
    if (texts[i].empty()) {
      throw config_error(
          fmt::format("node URI {} of {} is empty{}", k, n, k == n ? " (the list ends with a ',')" : ""));
    }
    try {
      (void)member_options::parse(texts[i]);
    } catch (const config_error& e) {
      // "redis://:pa,ss@host" is split inside its password, and the parser's
      // message would show "pa" as something else (a host, a port): when
      // the user info seems to go on after the ',' (an '@' before the next
      // member that starts with a scheme), say only where.
      bool user_info_goes_on = false;
      for (std::size_t j = i + 1; j < n && !starts_member(texts[j]); ++j)
        user_info_goes_on = user_info_goes_on || texts[j].find('@') != std::string::npos;
      if (!members[i].cluster && user_info_goes_on) {
        throw config_error(
            fmt::format("node URI {} is cut short by a ',' (not shown: it may hold a password; write a ',' "
                        "inside a URI as %2C)",
                        k));
      }
      if (!starts_member(texts[i])) {
        fail_member(k, n,
                    fmt::format("{}; in a list, only the seeds after a redis+cluster:// or rediss+cluster:// "
                                "URI go without a scheme",
                                e.what()));
      }
      fail_member(k, n, e.what());
    }
  }
  return texts;
}

std::vector<std::string> members_from_env(const char* var) {
  if (var == nullptr || *var == '\0') throw config_error("members_from_env: no variable name given");
  const char* value = std::getenv(var);
  if (value == nullptr) {
    throw config_error(
        fmt::format("{} is not set (expected node URIs separated by ',', e.g. "
                    "redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003)",
                    var));
  }
  if (trim_left_blanks(value).empty())
    throw config_error(fmt::format("{} is empty (expected node URIs separated by ',')", var));
  try {
    return parse_members(value);
  } catch (const config_error& e) {
    throw config_error(fmt::format("{}: {}", var, e.what()));
  }
}

}  // namespace redsync
