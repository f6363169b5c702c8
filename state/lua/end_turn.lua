-- end_turn.lua: finish a turn: keep the lock for queued messages, else go idle.
--
-- KEYS[1]  lock     STRING ns:{s:sid}:lock
-- KEYS[2]  inbox    LIST   ns:{s:sid}:inbox
-- KEYS[3]  pending  STRING ns:{s:sid}:pending
-- KEYS[4]  jobs     HASH   ns:{s:sid}:pending_jobs  cron job member -> its pending fire id
-- ARGV[1]  token     the caller's lock token
-- ARGV[2]  lease_ms  lock lease, renewed when the lock is kept
--
-- Returns
--   {-1}                 the lock is not ours (lease expired, another turn owns it): no change
--   {0}                  the inbox is not empty: the lock is kept, renewed; drain the inbox next
--   {1, pending|false}   the session is idle, the lock released; a pending fire id, consumed,
--                        which the caller should now try to begin: the heartbeat's first,
--                        else one cron job's (the others wait for the next end of a turn)
--
-- User messages win: a pending fire is handed back only once the inbox is empty.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return {-1}
end

if redis.call('LLEN', KEYS[2]) > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {0}
end

redis.call('DEL', KEYS[1])
local pending = redis.call('GET', KEYS[3])
redis.call('DEL', KEYS[3])
if not pending then
    -- A handful at most: one per job aimed at this session.
    local job = redis.call('HGETALL', KEYS[4])
    if job[1] then
        redis.call('HDEL', KEYS[4], job[1])
        pending = job[2]
    end
end
return {1, pending}
