-- restore_commit.lua: record a restore step's progress and give up the lease, if still held.
--
-- KEYS[1]  lease  STRING ns:{restore}:lease  the token of the beat replica running a step
-- KEYS[2]  sweep  HASH   ns:{restore}:sweep  epoch, phase, cursor, started, next, steps, last
-- ARGV[1]  token  the caller's lease token
-- ARGV[2]  n      how many field names to delete follow
-- ARGV[3]…ARGV[2+n]  fields to delete; then field, value pairs to set
--
-- Returns 1 when recorded (and the lease released), 0 when the lease is not the caller's.
--
-- The lease is checked, not re-taken: a lease that is gone means another replica took over,
-- or Redis lost its data (a flush or restart drops the lease with the index). Recording a
-- cursor then would skip rows the loss took; refused, the step is simply done again.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
local n = tonumber(ARGV[2])
for i = 3, 2 + n do
    redis.call('HDEL', KEYS[2], ARGV[i])
end
for i = 3 + n, #ARGV, 2 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('DEL', KEYS[1])
return 1
