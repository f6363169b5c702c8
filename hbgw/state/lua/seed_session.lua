-- seed_session.lua: restore a session's Redis state from SQL (after Redis lost its data).
--
-- KEYS[1]  fence  STRING ns:{s:sid}:fence
-- ARGV[1]  fence_floor  the highest fence recorded in SQL for the session
--
-- Returns the fence counter after seeding.
--
-- Fences must keep increasing across a loss of Redis, or a new turn could reuse a fence that SQL
-- already saw and be taken for the older turn: the counter is raised to the floor, never lowered.
-- Idle is not stored: a session is idle when no turn holds its lock and nothing is queued or in
-- flight (try_begin reads exactly that), so an idle session costs one key besides its due entry.

local floor = tonumber(ARGV[1])
local current = redis.call('GET', KEYS[1])
if not current or tonumber(current) < floor then
    redis.call('SET', KEYS[1], ARGV[1])
    current = ARGV[1]
end

return tonumber(current)
