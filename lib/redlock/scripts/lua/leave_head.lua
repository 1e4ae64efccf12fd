-- Leaving the line's KEYS (names, lines, leases: n each), without the
-- release's shortcut (a waiter that leaves must never delete a name).

local n = #KEYS / 3
local function line(i) return KEYS[n + i] end
local function leases(i) return KEYS[2 * n + i] end
