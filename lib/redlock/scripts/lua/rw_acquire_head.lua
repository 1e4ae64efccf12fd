-- A reader's acquisition's KEYS: the name, the node record, its line, the
-- line's leases, the readers' set, and on a cluster member the server mark
-- last (server_mark.hpp). One name: an RWMutex has no multi-name form.
-- ARGV as acquire.lua's: value, expiry, arrival, lease, mode, this
-- attempt's arrival, the channel.

local n = 1
local function line() return KEYS[3] end
local function leases() return KEYS[4] end
local readers = KEYS[5]
