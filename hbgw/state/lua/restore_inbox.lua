-- restore_inbox.lua: put a session's queued messages (SQL's list) back into its inbox.
--
-- KEYS[1]  inbox     LIST   ns:{s:sid}:inbox     message ids oldest first
-- KEYS[2]  inflight  LIST   ns:{s:sid}:inflight  message ids taken by a turn, not yet answered
-- ARGV[1]…ARGV[n]  the ids SQL has queued for the session (message ids: integers)
--
-- Returns the number of ids put back.
--
-- Redis lost them (a flush, a restart without persistence, a send while it was down): every id
-- neither in the inbox nor in flight goes back, and the inbox is rewritten in message order
-- (ids grow with arrival), so a message that waited longest still runs first. One script, so no
-- turn takes a message between the check and the write. An id answered after SQL was read may
-- come back once more; the turn skips a message that is already done.

local present = {}
for _, id in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    present[id] = 'inflight'
end
local inbox = {}
for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    if not present[id] then
        present[id] = 'inbox'
        table.insert(inbox, id)
    end
end

local added = 0
for _, id in ipairs(ARGV) do
    if not present[id] then
        present[id] = 'inbox'
        table.insert(inbox, id)
        added = added + 1
    end
end
if added == 0 then
    return 0
end

-- Numeric ids in numeric order; anything else (never written by the gateway) after them.
local function before(a, b)
    local na, nb = tonumber(a), tonumber(b)
    if na and nb then
        return na < nb
    end
    if na or nb then
        return na ~= nil
    end
    return a < b
end
table.sort(inbox, before)
redis.call('DEL', KEYS[1])
-- In slices: unpack() of a very long list would overflow Lua's stack.
for first = 1, #inbox, 1000 do
    redis.call('RPUSH', KEYS[1], unpack(inbox, first, math.min(first + 999, #inbox)))
end
return added
