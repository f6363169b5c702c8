-- seed_session.lua: restore a session's Redis state from SQL (after Redis lost its data).
--
-- KEYS[1]  fence  STRING ns:{s:sid}:fence
-- KEYS[2]  lock   STRING ns:{s:sid}:lock
-- KEYS[3]  idle   STRING ns:{s:sid}:idle
-- KEYS[4]  inbox  LIST   ns:{s:sid}:inbox
-- ARGV[1]  fence_floor  the highest fence recorded in SQL for the session
--
-- Returns the fence counter after seeding.
--
-- Fences must keep increasing across a loss of Redis, or a new turn could reuse a fence that SQL
-- already saw and be taken for the older turn: the counter is raised to the floor, never lowered.
-- The idle flag is set only when no turn holds the lock and no message is queued.

local floor = tonumber(ARGV[1])
local current = redis.call('GET', KEYS[1])
if not current or tonumber(current) < floor then
    redis.call('SET', KEYS[1], ARGV[1])
    current = ARGV[1]
end

if redis.call('EXISTS', KEYS[2]) == 0 and redis.call('LLEN', KEYS[4]) == 0 then
    redis.call('SET', KEYS[3], '1')
end
return tonumber(current)
