// The Lua sources of a holder's scripts that never touch a waiting line:
// extend and check (the lock scripts that do are in scripts.cpp).

#include "redlock/scripts/script_cache.hpp"
#include "redlock/scripts/scripts.hpp"

namespace redsync::detail {

namespace {

// Compare-and-PEXPIRE, optionally re-creating missing keys (never
// overwriting another holder's value). A key a release reserved for a
// waiter (its value starts with a NUL byte) reads as missing, as in the
// release, and is never re-created over.
constexpr std::string_view extend_source = R"lua(
local values, missing, reserved = {}, 0, false
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v == false then
    missing = missing + 1
  elseif string.byte(v, 1) == 0 then
    reserved = true
  elseif v ~= ARGV[1] then
    return -1
  end
  values[i] = v
end
if reserved or (missing > 0 and ARGV[3] ~= '1') then
  return 0
end
for i = 1, #KEYS do
  if values[i] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  else
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  end
end
return 1
)lua";

// Read-only ownership check, three-way like the others (a reservation
// reads as missing).
constexpr std::string_view check_source = R"lua(
local missing = 0
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v == false or string.byte(v, 1) == 0 then
    missing = missing + 1
  elseif v ~= ARGV[1] then
    return -1
  end
end
if missing > 0 then
  return 0
end
return 1
)lua";

}  // namespace

const lua_script& extend_script() {
  return cached_script<extend_source>();
}

const lua_script& check_script() {
  return cached_script<check_source>();
}

}  // namespace redsync::detail
