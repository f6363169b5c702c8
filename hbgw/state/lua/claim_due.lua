-- claim_due.lua: atomically claim the due members of one due-index shard.
--
-- KEYS[1]  due-index shard ZSET (ns:{due:i}): member = session id, score = due time, ms
-- ARGV[1]  now_ms    claim members whose score <= now_ms
-- ARGV[2]  lease_ms  a claimed member's new score is now_ms + lease_ms
-- ARGV[3]  limit     claim at most this many, lowest score first
--
-- Returns a flat array {member, original_score, member, original_score, ...}.
--
-- A claim is a lease, not a removal: if nobody settles it (the worker that should have run the
-- fire died), the member becomes due again when the lease ends, so dispatch is at-least-once.
-- Settling means scheduling the next due time, which overwrites the lease score.
--
-- Cost is O(log N + limit): ZRANGEBYSCORE with LIMIT walks only the due members, however many
-- are scheduled. (ZRANGEBYSCORE rather than ZRANGE ... BYSCORE keeps Redis < 6.2 working.)

-- '%.0f' keeps every digit of a ms timestamp; Lua's default number format keeps only 14.
local lease_until = string.format('%.0f', tonumber(ARGV[1]) + tonumber(ARGV[2]))

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[3])
-- One ZADD per chunk of members rather than per member; the chunk keeps unpack() far below
-- Lua's stack limit whatever the limit.
local args = {}
for i = 1, #due, 2 do
    args[#args + 1] = lease_until
    args[#args + 1] = due[i]
    if #args >= 1000 then
        redis.call('ZADD', KEYS[1], unpack(args))
        args = {}
    end
end
if #args > 0 then
    redis.call('ZADD', KEYS[1], unpack(args))
end
return due
