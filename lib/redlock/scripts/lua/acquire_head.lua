-- The acquisition's KEYS: names (n), record, lines (n), leases (n). On a
-- cluster member the server mark's key comes last (server_mark.hpp), so
-- there `n` is (#KEYS - 2) / 3 (embed_lua.py: mark_key_last).

local n = (#KEYS - 1) / 3
local function line(i) return KEYS[n + 1 + i] end
local function leases(i) return KEYS[2 * n + 1 + i] end
