-- next_step.lua: the drain's step under a held lock, in one call: acknowledge the message the
-- last step answered, then take the next one, or end the turn.
--
-- KEYS[1]  lock     STRING ns:{s:sid}:lock
-- KEYS[2]  inbox    LIST   ns:{s:sid}:inbox
-- KEYS[3]  inflight LIST   ns:{s:sid}:inflight
-- KEYS[4]  pending  STRING ns:{s:sid}:pending
-- KEYS[5]  jobs     HASH   ns:{s:sid}:pending_jobs  cron job member -> its pending fire id
-- KEYS[6]  estop    STRING ns:{s:sid}:estop    this session's emergency stop
-- ARGV[1]  token     the caller's lock token
-- ARGV[2]  lease_ms  lock lease, renewed when the lock is kept
-- ARGV[3]  ack       the message id the last step answered, or ""
-- ARGV[4]  mode      "end" (an empty inbox ends the turn) or "keep" (the first step of a
--                    drain grant: the lock is kept for the delivery retries, whatever comes)
--
-- Returns
--   {-1}                 the lock is not ours: nothing taken (the ack is made all the same)
--   {2}                  the session's emergency stop is on: the lock is given back, the inbox
--                        keeps its messages (in order) for the drain after the stop
--   {0, message_id}      the oldest message, moved to the in-flight list; the lock renewed
--   {3}                  (mode "keep") the inbox is empty; the lock kept
--   {1, pending|false}   (mode "end") the session is idle, the lock released; a pending fire
--                        id, consumed, to begin next: the heartbeat's first, else one job's
--
-- User messages win: a pending fire is handed back only once the inbox is empty. The global
-- emergency stop is another slot: the caller reads it in the same round trip and puts a taken
-- message back.

if ARGV[3] ~= '' then
    redis.call('LREM', KEYS[3], 1, ARGV[3])
end

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return {-1}
end

if redis.call('EXISTS', KEYS[6]) == 1 then
    redis.call('DEL', KEYS[1])
    return {2}
end

local message = redis.call('LMOVE', KEYS[2], KEYS[3], 'LEFT', 'RIGHT')
if message then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {0, message}
end

if ARGV[4] == 'keep' then
    return {3}
end

redis.call('DEL', KEYS[1])
local pending = redis.call('GET', KEYS[4])
redis.call('DEL', KEYS[4])
if not pending then
    -- A handful at most: one per job aimed at this session.
    local job = redis.call('HGETALL', KEYS[5])
    if job[1] then
        redis.call('HDEL', KEYS[5], job[1])
        pending = job[2]
    end
end
return {1, pending}
