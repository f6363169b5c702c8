-- lock_release.lua: delete the session lock if the caller still holds it.
--
-- KEYS[1]  lock  STRING ns:{s:sid}:lock
-- ARGV[1]  token  the caller's lock token
--
-- Returns 1 when released, 0 when the lock is held by someone else or gone.
--
-- Nothing else changes: a free lock with an empty inbox is what idle means (try_begin).

if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
