// The semaphore's scripts, keys and answers (semaphore_scripts.hpp). The
// scripts' Lua is lua/semaphore_*.lua, embedded at build time
// (embed_lua.py).

#include "redlock/scripts/semaphore_scripts.hpp"

#include "redlock/scripts/cluster_keys.hpp"
#include "redlock/scripts/script_cache.hpp"

#include <charconv>

namespace redsync::detail {

namespace {

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

// A refusal: {-1, "s1,...", open}.
bool refused_shape(const reply& r) {
  return r.elements.size() == 3 && r.elements[0].integer == -1 && r.elements[1].type == reply::kind::string &&
         r.elements[2].type == reply::kind::integer;
}

}  // namespace

std::string semaphore_set_key(std::string_view name) {
  return "redsync:sem:{" + std::string(name) + "}";
}
std::string semaphore_permits_key(std::string_view name) {
  return semaphore_set_key(name) + ":permits";
}
std::string cluster_semaphore_set_key(std::string_view name) {
  return "redsync:sem:" + cluster_lock_key(name);
}
std::string semaphore_line_key(std::string_view set_key) {
  return std::string(set_key) + ":line";
}
std::string semaphore_leases_key(std::string_view set_key) {
  return std::string(set_key) + ":leases";
}
std::string semaphore_channel(std::string_view name) {
  return "redsync:sem-release:" + std::string(name);
}
std::string permit_member(std::uint32_t slot, std::string_view id) {
  return std::to_string(slot) + ":" + std::string(id);
}

// The acquisition and the release name their cluster variants: a grant
// that carries the server mark (server_mark.hpp), a release announced with
// SPUBLISH. The standalone bytes are the ones standalone members have run.
const lua_script& semaphore_acquire_script() {
  return embedded_script<lua::semaphore_acquire, lua::semaphore_acquire_cluster>();
}
const lua_script& semaphore_release_script() {
  return embedded_script<lua::semaphore_release, lua::semaphore_release_cluster>();
}
const lua_script& semaphore_leave_script() {
  return embedded_script<lua::semaphore_leave, lua::semaphore_leave_cluster>();
}
const lua_script& semaphore_acquire_count_only_script() {
  return embedded_script<lua::semaphore_acquire_count_only, lua::semaphore_acquire_count_only_cluster>();
}
const lua_script& semaphore_extend_script() {
  return embedded_script<lua::semaphore_extend>();
}
const lua_script& semaphore_fence_script() {
  return embedded_script<lua::semaphore_fence>();
}

node_status classify_semaphore_acquire(const reply& r) {
  if (r.type != reply::kind::array || r.elements.empty() || r.elements[0].type != reply::kind::integer)
    return node_status::reply_error;
  // A grant: {token, identity, age, window, slots[, server mark]}.
  const bool granted_shape =
      (r.elements.size() == 5 || r.elements.size() == 6) && r.elements[4].type == reply::kind::string;
  if (r.elements[0].integer > 0 && granted_shape) return node_status::ok;
  if (refused_shape(r)) return node_status::taken;
  if (semaphore_held_as_mutex(r)) return node_status::taken;
  return node_status::reply_error;
}

bool semaphore_held_as_mutex(const reply& r) {
  return r.type == reply::kind::array && r.elements.size() == 1 &&
         r.elements[0].type == reply::kind::integer && r.elements[0].integer == -3;
}

std::optional<semaphore_answer> read_semaphore_answer(const reply& r) {
  if (r.type != reply::kind::array || r.elements.empty() || r.elements[0].type != reply::kind::integer)
    return std::nullopt;
  const long long first = r.elements[0].integer;
  semaphore_answer a;
  if (semaphore_held_as_mutex(r)) {
    a.held_as_mutex = true;
    return a;
  }
  if (first == -2 && r.elements.size() == 2 && r.elements[1].type == reply::kind::integer) {
    a.stored_permits = r.elements[1].integer;
    return a;
  }
  const bool granted = first > 0 && (r.elements.size() == 5 || r.elements.size() == 6);
  if (!granted && !refused_shape(r)) return std::nullopt;
  const reply& listed = r.elements[granted ? 4 : 1];
  if (listed.type != reply::kind::string) return std::nullopt;
  a.others = parse_slots(listed.str);
  a.open = granted || r.elements[2].integer == 1;
  return a;
}

}  // namespace redsync::detail
