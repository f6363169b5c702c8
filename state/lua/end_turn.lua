-- end_turn.lua: finish a turn: keep the lock for queued messages, else go idle.
--
-- KEYS[1]  lock     STRING ns:{s:sid}:lock
-- KEYS[2]  inbox    LIST   ns:{s:sid}:inbox
-- KEYS[3]  pending  STRING ns:{s:sid}:pending
-- ARGV[1]  token     the caller's lock token
-- ARGV[2]  lease_ms  lock lease, renewed when the lock is kept
--
-- Returns
--   {-1}                 the lock is not ours (lease expired, another turn owns it): no change
--   {0}                  the inbox is not empty: the lock is kept, renewed; drain the inbox next
--   {1, pending|false}   the session is idle, the lock released; a pending fire id, consumed,
--                        which the caller should now try to begin
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
return {1, pending}
