// What each script's answer means, as pure functions of one reply.

#include "redlock/scripts/script_answers.hpp"

#include "redlock/quorum.hpp"

#include <charconv>

namespace redsync::detail {

namespace {

// The record's fields come back as strings; a field that is not a number
// reads as 0, as an absent one does.
std::int64_t field_int(std::string_view s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// Every client records an expiry it uses, at most max_expiry. Anything else
// would reach the repair delay, which is added to clock readings.
bool valid_window(std::chrono::milliseconds w) {
  return w >= std::chrono::milliseconds::zero() && w <= max_expiry;
}

}  // namespace

node_status classify_acquire(const reply& r) {
  if (r.type == reply::kind::array && !r.elements.empty() && r.elements[0].type == reply::kind::integer &&
      r.elements[0].integer > 0)
    return node_status::ok;
  if (r.type == reply::kind::integer && r.integer < 0) return node_status::taken;
  if (r.type == reply::kind::nil) return node_status::taken;
  return node_status::reply_error;
}

bool acquire_held_as_semaphore(const reply& r) {
  return r.type == reply::kind::integer && r.integer == -5;
}

node_status classify_three_way(const reply& r) {
  if (r.type != reply::kind::integer) return node_status::reply_error;
  if (r.integer == 1) return node_status::ok;
  if (r.integer == 0) return node_status::missing;
  if (r.integer == -1) return node_status::taken;
  return node_status::reply_error;
}

node_status classify_fence(const reply& r) {
  if (r.type == reply::kind::integer && r.integer == 1) return node_status::ok;
  if (r.type == reply::kind::integer && r.integer == 0) return node_status::missing;
  return node_status::reply_error;
}

bool acquire_answer_in_line(const reply& r) {
  return r.type == reply::kind::array && (r.elements.size() == 5 || r.elements.size() == 6) &&
         r.elements[4].type == reply::kind::integer && r.elements[4].integer == 1;
}

std::optional<acquire_vote> read_acquire_vote(const reply& r) {
  const bool well_formed = r.type == reply::kind::array && r.elements.size() >= 4 && r.elements.size() <= 6 &&
                           r.elements[1].type == reply::kind::string &&
                           r.elements[2].type == reply::kind::integer &&
                           r.elements[3].type == reply::kind::integer &&
                           (r.elements.size() < 6 || r.elements[5].type == reply::kind::string);
  if (!well_formed) return std::nullopt;
  acquire_vote v;
  if (r.elements.size() == 6) v.server_mark = r.elements[5].str;
  v.record_identity = r.elements[1].str;
  v.age = std::chrono::milliseconds{r.elements[2].integer};
  v.window = std::chrono::milliseconds{r.elements[3].integer};
  if (!valid_window(v.window)) return std::nullopt;
  return v;
}

std::optional<node_record> read_node_record(const reply& r) {
  if (r.type != reply::kind::array || r.elements.size() != 6) return std::nullopt;
  node_record rec;
  rec.has_counter = !r.elements[0].str.empty();
  rec.fence = field_int(r.elements[0].str);
  rec.identity = r.elements[1].str;
  rec.now_ms = field_int(r.elements[3].str);
  rec.mark = r.elements[4].str;
  const auto first = rec.mark.find(' ');
  const auto second = first == std::string_view::npos ? first : rec.mark.find(' ', first + 1);
  if (second != std::string_view::npos && first > 0 && second + 1 < rec.mark.size()) {
    std::int64_t at = -1;
    const auto [end, ec] = std::from_chars(rec.mark.data(), rec.mark.data() + first, at);
    if (ec == std::errc{} && end == rec.mark.data() + first && at >= 0) {
      rec.mark_ms = at;
      rec.mark_identity = rec.mark.substr(second + 1);
    }
  }
  rec.window = std::chrono::milliseconds{field_int(r.elements[5].str)};
  if (!valid_window(rec.window)) return std::nullopt;
  return rec;
}

}  // namespace redsync::detail
