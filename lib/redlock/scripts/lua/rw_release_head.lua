-- A reader's release, undo and leaving the line: KEYS the name, its line,
-- the line's leases, the readers' set; ARGV the value, "0" (release,
-- leave) or "1" (undo), the channel.

local n = 1
local function line() return KEYS[2] end
local function leases() return KEYS[3] end
local readers = KEYS[4]
