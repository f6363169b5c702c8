-- enqueue_user.lua: queue a user message id for a session; the session is no longer idle.
--
-- KEYS[1]  inbox     LIST ns:{s:sid}:inbox, message ids oldest first
-- KEYS[2]  inflight  LIST ns:{s:sid}:inflight, message ids taken by a turn, not yet answered
-- ARGV[1]  msg_id
--
-- Returns the inbox length after the push (or as it was, for an id already queued).
--
-- A non-empty inbox is what makes the session not idle (try_begin refuses a fire while it is),
-- so no heartbeat can slip in between a message's arrival and its turn. An id already queued or
-- in flight is not pushed again: a client's retry, or the restore pass putting the message back
-- first, must not queue it twice.

if redis.call('LPOS', KEYS[1], ARGV[1]) or redis.call('LPOS', KEYS[2], ARGV[1]) then
    return redis.call('LLEN', KEYS[1])
end
return redis.call('RPUSH', KEYS[1], ARGV[1])
