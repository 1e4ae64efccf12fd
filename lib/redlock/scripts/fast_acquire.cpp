// The uncontended acquisition as one MULTI/EXEC transaction, and its answer
// read back in the acquire script's shape.

#include "redlock/scripts/fast_acquire.hpp"

#include "redlock/scripts/scripts.hpp"

#include <charconv>
#include <optional>
#include <string>

namespace redsync::detail {

namespace {

// The commands around the SET never change: encoded once.
const std::string& transaction_head() {
  static const std::string head = [] {
    std::string s;
    append_command(s, {"MULTI"});
    return s;
  }();
  return head;
}

const std::string& transaction_tail() {
  static const std::string tail = [] {
    std::string s;
    append_command(s, {"HINCRBY", record_key, "fence", "1"});
    append_command(s, {"HMGET", record_key, "run", "since", "window"});
    append_command(s, {"TIME"});
    append_command(s, {"EXEC"});
    return s;
  }();
  return tail;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

reply error_reply(std::string text) {
  reply r;
  r.type = reply::kind::error;
  r.str = std::move(text);
  return r;
}

reply integer_reply(long long v) {
  reply r;
  r.type = reply::kind::integer;
  r.integer = v;
  return r;
}

reply string_reply(std::string v) {
  reply r;
  r.type = reply::kind::string;
  r.str = std::move(v);
  return r;
}

}  // namespace

wire_command encode_fast_acquire(std::string_view name, std::string_view value, std::string_view expiry_ms) {
  std::string wire;
  wire.reserve(transaction_head().size() + transaction_tail().size() + name.size() + value.size() + 64);
  wire += transaction_head();
  append_command(wire, {"SET", name, value, "NX", "PX", expiry_ms});
  wire += transaction_tail();
  return std::make_shared<const std::string>(std::move(wire));
}

wire_command discard_command() {
  static const wire_command discard = encode_command({"DISCARD"});
  return discard;
}

reply fast_acquire_answer(reply&& exec) {
  if (exec.is_error()) return std::move(exec);
  if (exec.type != reply::kind::array || exec.elements.size() != 4)
    return error_reply("ERR unexpected reply to the acquisition transaction");
  for (reply& e : exec.elements)
    if (e.is_error()) return std::move(e);
  const reply& set = exec.elements[0];
  const reply& counter = exec.elements[1];
  const reply& record = exec.elements[2];
  const reply& time = exec.elements[3];
  if (set.type == reply::kind::nil) return reply{};  // busy: the key holds a value
  const bool well_formed = set.type == reply::kind::status && counter.type == reply::kind::integer &&
                           record.type == reply::kind::array && record.elements.size() == 3 &&
                           time.type == reply::kind::array && time.elements.size() == 2;
  if (!well_formed) return error_reply("ERR unexpected reply to the acquisition transaction");
  const auto seconds = to_int(time.elements[0].str);
  const auto micros = to_int(time.elements[1].str);
  if (!seconds || !micros) return error_reply("ERR unexpected TIME reply in the acquisition transaction");
  const std::int64_t now_ms = *seconds * 1000 + *micros / 1000;
  const reply& run = record.elements[0];
  const reply& since = record.elements[1];
  const reply& window = record.elements[2];
  std::int64_t age = -1;
  if (since.type != reply::kind::nil) {
    const auto s = to_int(since.str);
    if (!s) return error_reply("ERR the redsync node record's `since` is not a number");
    age = now_ms - *s;
  }
  std::int64_t recorded_window = 0;
  if (window.type != reply::kind::nil) {
    const auto w = to_int(window.str);
    if (!w) return error_reply("ERR the redsync node record's `window` is not a number");
    recorded_window = *w;
  }
  // The vote is written into the transaction's own four elements: no
  // allocation, and the run id is moved rather than copied.
  const long long count = counter.integer;
  std::string run_id =
      run.type == reply::kind::nil ? std::string{} : std::move(exec.elements[2].elements[0].str);
  exec.elements[0] = integer_reply(count);
  exec.elements[1] = string_reply(std::move(run_id));
  exec.elements[2] = integer_reply(age);
  exec.elements[3] = integer_reply(recorded_window);
  return std::move(exec);
}

}  // namespace redsync::detail
