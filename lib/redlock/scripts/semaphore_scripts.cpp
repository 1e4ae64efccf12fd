// The semaphore's Lua scripts, keys and answers (semaphore_scripts.hpp).

#include "redlock/scripts/semaphore_scripts.hpp"

#include "redlock/scripts/script_cache.hpp"
#include "redlock/scripts/scripts.hpp"
#include "redlock/scripts/server_mark.hpp"
#include "util/sha1.hpp"

#include <charconv>
#include <stdexcept>

namespace redsync::detail {

namespace {

// Shared by every script: the server clock (read before any write), the
// removal of expired permits, and the TTL of both keys set to the latest
// permit's expiry (or both deleted when none is left).
constexpr std::string_view prelude = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local function keep_until_last()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if not last[2] then
    redis.call('DEL', KEYS[1], KEYS[2])
    return
  end
  local ttl = tonumber(last[2]) - now
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
)lua";

constexpr std::string_view acquire_source = R"lua(
local member, slot, k = ARGV[1], ARGV[2], tonumber(ARGV[3])
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
local stored = redis.call('GET', KEYS[2])
if stored and #live > 0 and tonumber(stored) ~= k then
  return {-2, tonumber(stored)}
end
local others, count, slot_live = {}, 0, false
for _, m in ipairs(live) do
  if m ~= member then
    local s = string.match(m, '^(%d+):')
    count = count + 1
    others[#others + 1] = s
    if s == slot then
      slot_live = true
    end
  end
end
local listed = table.concat(others, ',')
if slot_live or count >= k then
  return {-1, listed}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), member)
redis.call('SET', KEYS[2], ARGV[3])
keep_until_last()
local record = KEYS[3]
local token = redis.call('HINCRBY', record, 'fence', 1)
local stamp = redis.call('HMGET', record, 'run', 'since', 'window')
local age = -1
if stamp[2] then
  age = now - tonumber(stamp[2])
end
local window = tonumber(stamp[3] or '0')
if window < tonumber(ARGV[4]) then
  window = tonumber(ARGV[4])
  redis.call('HSET', record, 'window', window)
end
return {token, stamp[1] or '', age, window, listed}
)lua";

// The release, around its publish command (standalone_publish or
// cluster_publish, scripts.hpp).
constexpr std::string_view release_source_head = R"lua(
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
keep_until_last()
if removed == 1 and ARGV[3] == '1' then
  redis.call(')lua";
constexpr std::string_view release_source_tail = R"lua(', ARGV[2], string.match(ARGV[1], '^(%d+):'))
end
return removed
)lua";

constexpr std::string_view extend_source = R"lua(
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep_until_last()
return 1
)lua";

// Reads the clock but never drops expired permits: KEYS[2] is the record.
constexpr std::string_view fence_source = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) > now then
  local c = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0')
  if c < tonumber(ARGV[2]) then
    redis.call('HSET', KEYS[2], 'fence', ARGV[2])
  end
  return 1
end
return 0
)lua";

// The prelude and `Body`, joined and hashed once.
template <const std::string_view& Body>
const lua_script& with_prelude() {
  static const std::string source = std::string(prelude) + std::string(Body);
  static const lua_script s{source, sha1_hex(source)};
  return s;
}

// The release with `Publish` as its publish command, naming `cluster`.
template <const std::string_view& Publish>
const lua_script& release_variant(const lua_script* cluster) {
  static const std::string source = std::string(prelude) + std::string(release_source_head) +
                                    std::string(Publish) + std::string(release_source_tail);
  static const lua_script s{source, sha1_hex(source), cluster};
  return s;
}

std::vector<std::uint32_t> parse_slots(std::string_view listed) {
  std::vector<std::uint32_t> out;
  while (!listed.empty()) {
    const auto comma = listed.find(',');
    const auto part = listed.substr(0, comma);
    std::uint32_t s = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), s);
    if (ec == std::errc{} && end == part.data() + part.size()) out.push_back(s);
    if (comma == std::string_view::npos) break;
    listed.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

std::string semaphore_set_key(std::string_view name) {
  return "redsync:sem:{" + std::string(name) + "}";
}
std::string semaphore_permits_key(std::string_view name) {
  return semaphore_set_key(name) + ":permits";
}
std::string semaphore_channel(std::string_view name) {
  return "redsync:sem-release:" + std::string(name);
}
std::string permit_member(std::uint32_t slot, std::string_view id) {
  return std::to_string(slot) + ":" + std::string(id);
}

namespace {

// The acquisition's standalone form (the bytes standalone members have
// run) naming its cluster form (the mark key last, the server mark appended
// to a grant), with the slot test replaced by SlotTest in both.
template <const std::string_view& SlotTest>
const lua_script& acquire_variant() {
  const auto replace = [](std::string s, std::string_view what, std::string_view with) {
    const auto at = s.find(what);
    if (at == std::string::npos) throw std::logic_error("semaphore acquire script: piece not found");
    return s.replace(at, what.size(), with);
  };
  const auto join = [&replace](bool cluster) {
    std::string s(prelude);
    if (cluster) s += mark_vote;
    s += acquire_source;
    s = replace(std::move(s), "slot_live or count >= k", SlotTest);
    if (!cluster) return s;
    return replace(std::move(s), "return {token, stamp[1] or '', age, window, listed}",
                   "return vote({token, stamp[1] or '', age, window, listed})");
  };
  static const std::string cluster_source = join(true);
  static const std::string plain_source = join(false);
  static const lua_script cluster{cluster_source, sha1_hex(cluster_source), nullptr};
  static const lua_script plain{plain_source, sha1_hex(plain_source), &cluster};
  return plain;
}
constexpr std::string_view production_slot_test = "slot_live or count >= k";
// The slot test taken out, so that everything else (rule M, expiry, the
// counter, the answer) stays the same.
constexpr std::string_view count_only_slot_test = "count >= k";

}  // namespace

const lua_script& semaphore_acquire_script() {
  return acquire_variant<production_slot_test>();
}
const lua_script& semaphore_release_script() {
  // The standalone bytes every release has used (same SHA1), naming the
  // variant a cluster member runs.
  return release_variant<standalone_publish>(&release_variant<cluster_publish>(nullptr));
}
const lua_script& semaphore_acquire_count_only_script() {
  return acquire_variant<count_only_slot_test>();
}
const lua_script& semaphore_extend_script() {
  return with_prelude<extend_source>();
}
const lua_script& semaphore_fence_script() {
  return cached_script<fence_source>();
}

node_status classify_semaphore_acquire(const reply& r) {
  if (r.type != reply::kind::array || r.elements.empty() || r.elements[0].type != reply::kind::integer)
    return node_status::reply_error;
  // A grant: {token, identity, age, window, slots[, server mark]}.
  const bool granted_shape =
      (r.elements.size() == 5 || r.elements.size() == 6) && r.elements[4].type == reply::kind::string;
  if (r.elements[0].integer > 0 && granted_shape) return node_status::ok;
  const bool listed = r.elements.back().type == reply::kind::string;
  if (r.elements[0].integer == -1 && r.elements.size() == 2 && listed) return node_status::taken;
  return node_status::reply_error;
}

std::optional<semaphore_answer> read_semaphore_answer(const reply& r) {
  if (r.type != reply::kind::array || r.elements.empty() || r.elements[0].type != reply::kind::integer)
    return std::nullopt;
  const long long first = r.elements[0].integer;
  semaphore_answer a;
  if (first == -2 && r.elements.size() == 2 && r.elements[1].type == reply::kind::integer) {
    a.stored_permits = r.elements[1].integer;
    return a;
  }
  const bool granted = first > 0 && (r.elements.size() == 5 || r.elements.size() == 6);
  const reply& listed = granted ? r.elements[4] : r.elements.back();
  const bool shaped = (first == -1 && r.elements.size() == 2) || granted;
  if (!shaped || listed.type != reply::kind::string) return std::nullopt;
  a.others = parse_slots(listed.str);
  return a;
}

}  // namespace redsync::detail
