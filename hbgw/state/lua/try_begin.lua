-- try_begin.lua: start a turn on a session, or record the fire as pending.
--
-- KEYS[1]  lock     STRING ns:{s:sid}:lock     holder token, PX lease
-- KEYS[2]  fence    STRING ns:{s:sid}:fence    counter, +1 per granted lock
-- KEYS[3]  inbox    LIST   ns:{s:sid}:inbox
-- KEYS[4]  pending  STRING ns:{s:sid}:pending  the session's single pending fire id
-- KEYS[5]  inflight LIST   ns:{s:sid}:inflight message ids taken by a turn, not yet answered
-- KEYS[6]  jobs     HASH   ns:{s:sid}:pending_jobs  cron job member -> its pending fire id
-- ARGV[1]  token     the caller's lock token
-- ARGV[2]  lease_ms  lock lease
-- ARGV[3]  fire_id   (mode "fire"; ignored for "user")
-- ARGV[4]  mode      "fire" (a heartbeat), "job" (a cron job's run) or "user" (the inbox)
-- ARGV[5]  member    (mode "job") the job's due-index member, job:<id>
--
-- Returns {1, fence} when the lock was taken, else {0, "busy"} (lock held) or {0, "inbox"}
-- (mode "fire" only: user messages are queued and run first).
--
-- Mode "fire": a busy session keeps the fire as pending; a newer fire replaces an older one, so
-- any number of missed fires coalesce into one. Idle is not a stored flag: it is a free lock
-- and an empty inbox (a worker that died mid-turn left no lock once its lease expired). Taking the lock consumes any pending fire (coalesced into this one).
--
-- Mode "job": as "fire", but each job keeps its own pending fire beside the heartbeat's (a
-- newer fire of the same job replaces an older one), so neither replaces the other.
--
-- Mode "user": only the lock matters; a pending fire stays for next_step to hand back.
--
-- With the lock free, messages left in flight belong to a turn whose worker died: they go back
-- to the head of the inbox first, so nothing a user sent is lost and it still runs first.

local mode = ARGV[4]
if mode ~= 'fire' and mode ~= 'user' and mode ~= 'job' then
    return redis.error_reply('try_begin: mode must be "fire", "job" or "user", got ' .. tostring(mode))
end

local function keep_pending()
    if mode == 'fire' then
        redis.call('SET', KEYS[4], ARGV[3])
    elseif mode == 'job' then
        redis.call('HSET', KEYS[6], ARGV[5], ARGV[3])
    end
end

if redis.call('EXISTS', KEYS[1]) == 1 then
    keep_pending()
    return {0, 'busy'}
end

while true do
    local orphan = redis.call('RPOP', KEYS[5])
    if not orphan then
        break
    end
    redis.call('LPUSH', KEYS[3], orphan)
end

if mode ~= 'user' and redis.call('LLEN', KEYS[3]) > 0 then
    keep_pending()
    return {0, 'inbox'}
end

redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local fence = redis.call('INCR', KEYS[2])
if mode == 'fire' then
    redis.call('DEL', KEYS[4])
elseif mode == 'job' then
    redis.call('HDEL', KEYS[6], ARGV[5])
end
return {1, fence}
