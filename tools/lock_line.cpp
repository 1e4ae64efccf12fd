#include "lock_line.hpp"
#include "reply_number.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

namespace redsync::cli {
namespace {

// What a release leaves in a key reserved for the head of the line
// (lib/redlock/scripts/scripts.hpp: reserved_value_prefix).
constexpr std::string_view reserved_prefix{"\0redsync:next\0", 14};

}  // namespace

std::vector<std::vector<std::string>> line_commands(const std::string& name) {
  return {{"ZRANGE", name + ":redsync-line", "0", "-1", "WITHSCORES"}, {"HGETALL", name + ":redsync-leases"}};
}

void add_line(std::vector<waiter>& line, const probe_reply& members, const probe_reply& leases,
              long long server_now_ms) {
  using kind = probe_reply::kind;
  if (members.type != kind::array || leases.type != kind::array) return;
  const auto lease_of = [&](const std::string& value) -> std::optional<long long> {
    for (std::size_t i = 0; i + 1 < leases.elements.size(); i += 2) {
      if (leases.elements[i].str == value) return reply_number(leases.elements[i + 1].str);
    }
    return std::nullopt;
  };
  for (std::size_t i = 0; i + 1 < members.elements.size(); i += 2) {
    const std::string& value = members.elements[i].str;
    // WITHSCORES gives the score as a string; arrivals are whole µs, which a
    // double holds exactly for centuries.
    const double score = std::strtod(members.elements[i + 1].str.c_str(), nullptr);
    const auto until = lease_of(value);
    if (!until || *until < server_now_ms) continue;
    const std::chrono::milliseconds left{*until - server_now_ms};
    auto w = std::find_if(line.begin(), line.end(), [&](const waiter& x) { return x.value == value; });
    if (w == line.end()) {
      line.push_back({value, static_cast<long long>(score), 0, left, decode_holder_value(value)});
      w = line.end() - 1;
    }
    ++w->nodes;
    w->lease_left = std::max(w->lease_left, left);
  }
  std::stable_sort(line.begin(), line.end(),
                   [](const waiter& a, const waiter& b) { return a.arrival_us < b.arrival_us; });
}

std::vector<std::string> readers_command(const std::string& name) {
  return {"ZRANGE", name + ":redsync-readers", "0", "-1", "WITHSCORES"};
}

std::vector<node_reader> live_readers(const probe_reply& members, long long server_now_ms) {
  std::vector<node_reader> out;
  if (members.type != probe_reply::kind::array) return out;
  for (std::size_t i = 0; i + 1 < members.elements.size(); i += 2) {
    const auto expiry = reply_number(members.elements[i + 1].str);
    if (!expiry || *expiry <= server_now_ms) continue;
    out.push_back({members.elements[i].str, std::chrono::milliseconds{*expiry - server_now_ms}});
  }
  return out;
}

std::optional<long long> server_ms(const probe_reply& time) {
  if (time.type != probe_reply::kind::array || time.elements.size() != 2) return std::nullopt;
  const auto secs = reply_number(time.elements[0].str);
  const auto micros = reply_number(time.elements[1].str);
  if (!secs || !micros) return std::nullopt;
  return *secs * 1000 + *micros / 1000;
}

std::optional<long long> fence_of(const probe_reply& record) {
  if (record.type != probe_reply::kind::array || record.elements.empty()) return std::nullopt;
  const probe_reply& f = record.elements[0];
  if (f.type != probe_reply::kind::string) return std::nullopt;
  return reply_number(f.str);
}

std::optional<std::string> reserved_for(std::string_view key_value) {
  if (!key_value.starts_with(reserved_prefix)) return std::nullopt;
  return std::string(key_value.substr(reserved_prefix.size()));
}

std::string describe_waiter(const waiter& w) {
  const std::string_view kind = is_reader_value(w.value) ? "reader " : "";
  if (w.identity)
    return fmt::format("{}{}@{} pid {}", kind, w.identity->user, w.identity->host, w.identity->pid);
  // The reader's tag is a control character: shown as the word instead.
  return fmt::format("{}value \"{}\"", kind, std::string_view(w.value).substr(kind.empty() ? 0 : 1));
}

}  // namespace redsync::cli
