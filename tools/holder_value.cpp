#include "holder_value.hpp"

#include "human_duration.hpp"

#include <fmt/format.h>

#include <pwd.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <ctime>
#include <system_error>
#include <vector>

namespace redsync::cli {
namespace {

constexpr std::string_view prefix = "redsync:1:";
constexpr std::string_view base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::size_t random_bytes = 16;
constexpr std::size_t random_chars = 22;  // 16 bytes, unpadded base64

bool plain(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

std::string percent_encode(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (plain(c)) {
      out += c;
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (plain(s[i])) {
      out += s[i];
      continue;
    }
    if (s[i] != '%' || i + 2 >= s.size()) return std::nullopt;
    const int hi = hex_digit(s[i + 1]);
    const int lo = hex_digit(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string encode_random(const unsigned char (&b)[random_bytes]) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : b) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += base64url[(acc >> bits) & 0x3f];
    }
  }
  if (bits > 0) out += base64url[(acc << (6 - bits)) & 0x3f];
  return out;
}

template <class T>
std::optional<T> decimal(std::string_view s, std::size_t max_digits) {
  T v{};
  if (s.empty() || s.size() > max_digits) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string user_name() {
  if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  return std::to_string(::geteuid());
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

}  // namespace

std::string make_holder_value() {
  unsigned char bytes[random_bytes];
  std::size_t got = 0;
  while (got < random_bytes) {
    const ssize_t n = ::getrandom(bytes + got, random_bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    got += static_cast<std::size_t>(n);
  }
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return fmt::format("{}{}@{}:{}:{}:{}", prefix, percent_encode(user_name()), percent_encode(host_name()),
                     static_cast<long long>(::getpid()), now.count(), encode_random(bytes));
}

std::optional<holder_identity> decode_holder_value(std::string_view value) {
  if (is_reader_value(value)) value.remove_prefix(1);
  if (!value.starts_with(prefix)) return std::nullopt;
  value.remove_prefix(prefix.size());
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t colon = value.find(':', start);
    parts.push_back(
        value.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() != 4) return std::nullopt;
  const std::size_t at = parts[0].find('@');
  if (at == std::string_view::npos) return std::nullopt;
  auto user = percent_decode(parts[0].substr(0, at));
  auto host = percent_decode(parts[0].substr(at + 1));
  const auto pid = decimal<long long>(parts[1], 10);
  const auto ms = decimal<long long>(parts[2], 15);
  if (!user || !host || user->empty() || host->empty() || !pid || !ms) return std::nullopt;
  if (parts[3].size() != random_chars || parts[3].find_first_not_of(base64url) != std::string_view::npos) {
    return std::nullopt;
  }
  holder_identity h;
  h.user = std::move(*user);
  h.host = std::move(*host);
  h.pid = *pid;
  h.since = std::chrono::system_clock::time_point(std::chrono::milliseconds(*ms));
  return h;
}

std::string describe_since(std::chrono::system_clock::time_point since,
                           std::chrono::system_clock::time_point now) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(since.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - since);
  const std::string ago =
      age.count() >= 0 ? human_duration(age) + " ago" : "in the future: the clocks disagree";
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z ({})", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000, ago);
}

std::string describe_holder(const holder_identity& h, std::chrono::system_clock::time_point now) {
  return fmt::format("{}@{} pid {}, since {}", h.user, h.host, h.pid, describe_since(h.since, now));
}

}  // namespace redsync::cli
