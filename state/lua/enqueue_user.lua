-- enqueue_user.lua: queue a user message id for a session and mark the session not idle.
--
-- KEYS[1]  inbox  LIST ns:{s:sid}:inbox, message ids oldest first
-- KEYS[2]  idle   STRING ns:{s:sid}:idle
-- ARGV[1]  msg_id
--
-- Returns the inbox length after the push.
--
-- Clearing the idle flag in the same step as the push means no heartbeat can slip in between a
-- message's arrival and its turn.

local length = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return length
